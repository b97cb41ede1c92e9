"""Counts the package's code lines: not blank, not comments, not docstrings.

Each file is first formatted in memory by one fixed formatter (black, line
length 120), so that a count does not change with how lines are wrapped.

    pip install "black>=24"
    python tools/count_code_lines.py keras_transformer
"""

import ast
import io
import os
import sys
import tokenize

import black

MODE = black.Mode(line_length=120)


def docstring_lines(tree):
    """The line numbers of every module, class and function docstring."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def code_lines(source):
    source = black.format_str(source, mode=MODE)
    skip = docstring_lines(ast.parse(source))
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                          tokenize.ENDMARKER):
            continue
        lines.update(n for n in range(token.start[0], token.end[0] + 1) if n not in skip)
    return len(lines)


def main(root):
    total = 0
    for directory, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            if name.endswith(".py"):
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    total += code_lines(f.read())
    print(total)
    return total


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "keras_transformer")
