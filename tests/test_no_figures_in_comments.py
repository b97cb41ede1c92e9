"""Code comments say why, not how fast: no measured figures, dates or tool
versions in comments, docstrings or CLI help.

A measured figure is a number with a unit of time, share, speed-up, size or
throughput; a date is an ISO date or a month name with a day or a year; a
tool version is a library's or tool's name with a dotted version number (the
patterns' own test below lists examples of each). Settings the code uses, the
paper's numbers, shapes and upstream issue references are none of these.
Figures belong in benchmarks/results and the documents that cite them, where the run that
measured them is named. The scan reads the files as text (tokenize and ast),
importing neither TensorFlow nor Keras."""

import ast
import io
import os
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYTHON_FOLDERS = ("keras_transformer", "examples", "tools", "benchmarks", "tests")
# Shell scripts: `.ci/run` and every `*.sh` of the repository, outside hidden
# folders (.venv, .git, carried wheels and peers) and build outputs.
SHELL_SCRIPTS = (".ci/run",)
SKIPPED_FOLDERS = {"__pycache__", "build", "dist", "runs", "saved_models"}
HELP_KEYWORDS = {"help", "description", "epilog"}
# The text of string literals; newer Pythons give an f-string's text as FSTRING_MIDDLE tokens.
STRING_TOKENS = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}

_NUMBER = r"(?<![\w.])~?\d+(?:[.,]\d+)?(?:\s?(?:-|–|to)\s?\d+(?:\.\d+)?)?"
_UNIT = (
    r"(?:ms|µs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?"
    r"|[KMGT]i?B(?:/s)?|(?:sent(?:ences)?|tok(?:ens)?|steps?|samples?|examples?|batch(?:es)?|words?"
    r"|it|req(?:uests)?|queries)/s(?:ec)?)"
)
_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
    "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_TOOLS = (
    r"TensorFlow|tf-nightly|tensorflow-cpu|Keras|keras-nightly|JAX|jaxlib|PyTorch|torch|CTranslate2"
    r"|Python|CUDA|cuDNN|cuBLAS|XLA|oneDNN|NumPy|pytest"
)
PATTERNS = [
    # A number, or a range of two, with a unit of time, size or throughput.
    ("figure", re.compile(_NUMBER + r"\s?" + _UNIT + r"(?![\w/])")),
    # A share.
    ("figure", re.compile(_NUMBER + r"\s?(?:%|percent\b|per cent\b)")),
    # A factor, with a sign or in words; a shape (a sign between two numbers) is none.
    ("figure", re.compile(_NUMBER + r"\s?[x×](?![\w(])(?!\s*[\d(])")),
    ("figure", re.compile(_NUMBER + r"\s+times\s+(?:faster|slower|as\s+(?:fast|slow|long|large|much|many)\b"
                          r"|more|fewer|less|longer|shorter|larger|smaller|bigger)")),
    # An ISO date; a month with a year, or with a day (but not "May" and a number: a verb).
    ("date", re.compile(r"(?<!\d)20\d\d-[01]\d-[0-3]\d(?!\d)")),
    ("date", re.compile(r"\b(?:" + _MONTHS + r")\.?,?\s+20\d\d\b")),
    ("date", re.compile(r"\b(?:" + _MONTHS.replace("|May", "") + r")\.?\s+[0-3]?\d(?:st|nd|rd|th)?\b(?![.:]\d)")),
    ("date", re.compile(r"\b[0-3]?\d\s+(?:" + _MONTHS + r")\.?\s+20\d\d\b")),
    # A tool's name with a dotted version number.
    ("version", re.compile(r"\b(?:" + _TOOLS + r")\s?(?:[<>=!~]=?\s?)?v?\d+\.\d+", re.IGNORECASE)),
]


def _python_files():
    for folder in PYTHON_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


def _shell_files():
    for name in SHELL_SCRIPTS:
        if (ROOT / name).exists():
            yield ROOT / name
    for folder, folders, files in os.walk(ROOT):
        folders[:] = sorted(name for name in folders if not name.startswith(".") and name not in SKIPPED_FOLDERS
                            and not name.endswith(".egg-info"))
        for name in sorted(files):
            if name.endswith(".sh"):
                yield pathlib.Path(folder) / name


def _numbered_lines(first_line, text):
    return [(first_line + offset, line) for offset, line in enumerate(text.splitlines())]


def _python_prose(source):
    """(line number, text) of every comment, docstring and CLI help string."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    prose = [(token.start[0], token.string) for token in tokens if token.type == tokenize.COMMENT]

    def literal_lines(node):
        start, end = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)
        for token in tokens:
            if token.type in STRING_TOKENS and start <= token.start and token.end <= end:
                prose.extend(_numbered_lines(token.start[0], token.string))

    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
                literal_lines(first.value)
        elif isinstance(node, ast.keyword) and node.arg in HELP_KEYWORDS:
            literal_lines(node.value)
    return prose


def _shell_prose(source):
    """(line number, text) of every `#` comment of a bash script, the shebang
    left out; a `#` inside quotes or a word (`$#`, `${#name}`) is none."""
    prose = []
    for number, line in enumerate(source.splitlines(), 1):
        if number == 1 and line.startswith("#!"):
            continue
        quote = None
        for column, character in enumerate(line):
            if quote:
                if character == quote and line[column - 1] != "\\":
                    quote = None
            elif character in "'\"":
                quote = character
            elif character == "#" and (column == 0 or line[column - 1] in " \t;"):
                prose.append((number, line[column:]))
                break
    return prose


def find_hits():
    """`path:line: text` for every figure, date or tool version in prose."""
    hits = []
    sources = [(path, _python_prose) for path in _python_files()]
    sources += [(path, _shell_prose) for path in _shell_files()]
    for path, extract in sources:
        source = path.read_text(encoding="utf-8")
        for number, text in sorted(extract(source)):
            for kind, pattern in PATTERNS:
                match = pattern.search(text)
                if match:
                    hits.append(f"{path.relative_to(ROOT)}:{number}: {kind} {match.group(0)!r}: {text.strip()}")
                    break
    return hits


def test_the_patterns_catch_figures_dates_and_versions():
    caught = [
        "# 12.5 ms faster", "takes 16.5 s", "2-2.5x the speed", "33% less", "a 19 MB file",
        "about 7 minutes", "900 sent/s", "3,200 tokens/s", "40-80 s of warm-up", "8.3 minutes",
        "on 2026-11-25", "in November 2026", "since March 3", "TensorFlow 2.21", "Keras 3.15.1",
        "torch 2.13", "CTranslate2 4.8.5", "JAX 0.4", "python3.11", "ctranslate2 4.8.5's wheel",
        "10 times slower", "2.5 times as fast", "a 5 percent gain", "1.3× its", "Nov 25",
    ]
    passed = [
        "timeout=900", "a default of 64 sentences", "0.1 label smoothing", "beam 4", "1e-9",
        "d_model 512", "warm-up 4000", "shape (2, 7, 512)", "a 4x512 matrix", "2 x 3 blocks",
        "keras-team/keras#19381", "a Keras 3 package", "Python 3", "0x1F", "v2.0 of the format",
        "May 2 workers share", "%s and %d", "the 25 slowest tests", "Seq2Seq", "tf.float32",
        "h_0 and 2 heads", "step 10 of the schedule", "called 3 times", "each about 1.25 times the last",
        "10-minute intervals", "version:2.6.0", "Wu et al., 2016", "d_k)` written at positions",
    ]
    for text in caught:
        assert any(pattern.search(text) for _, pattern in PATTERNS), text
    for text in passed:
        assert not any(pattern.search(text) for _, pattern in PATTERNS), text


def test_the_scan_reads_every_shell_script():
    scanned = {path.relative_to(ROOT).as_posix() for path in _shell_files()}
    expected = {".ci/run", "tests/run.sh", "benchmarks/gpu_call.sh", "benchmarks/h100_call.sh", "tools/zoo_gpu_call.sh"}
    assert expected <= scanned, sorted(expected - scanned)
    assert not any(name.startswith(".venv/") for name in scanned), sorted(scanned)


def test_no_measured_figures_dates_or_tool_versions_in_prose():
    hits = find_hits()
    if hits:
        pytest.fail("Comments say why, not how fast; figures belong in benchmarks/results:\n" + "\n".join(hits),
                    pytrace=False)
