"""The ```python blocks of README.md and docs/*.md run, the documents'
relative links lead to files of the repository, and the benchmark results
files they name (`benchmarks/results/*.json`) are there.

Each document's python blocks run in order, in one namespace, in this
process (the TensorFlow pass; not marked `backend`), from a temporary working
directory, so that what they write goes there. They use the shipped presets,
whose models the module loads once for every document, and are kept cheap:
a few seconds a document.

A shown value: `expression  # -> value` on one line, or a line `# -> value`
right after an expression statement. The test checks that the expression's
`repr` is exactly `value`. A `# ->` after anything but an expression fails.

A block that cannot run here (a GPU, hours of training, a SavedModel or a
server it needs) is a ```python no-run block: it is compiled, and the names
its `from keras_transformer... import ...` and `import keras_transformer...`
lines import must exist.

Errors name the document and line, as `docs/decoding.md:42:`.
"""

import ast
import importlib
import io
import os
import re
import tokenize

import pytest

from tests.helpers import shipped_models  # noqa: F401 - each shipped preset's model loaded once
from tests.test_readme_commands import DOCUMENTS, ROOT, fence_info

SHOWN = re.compile(r"#\s*->\s?(.*)$")


def python_blocks(path):
    """`[(line, code, run)]` of the ```python blocks of `path`: the line of a
    block's first line of code, its code, and False for a no-run block."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, current = [], None
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            if current is not None:  # the closing fence
                if current[0] == "python":
                    blocks.append((current[1], "\n".join(lines[current[1] - 1 : number - 1]), current[2]))
                current = None
            else:
                language, options = fence_info(line)
                if language == "python":
                    assert set(options) <= {"no-run"}, f"{path}:{number}: unknown python block option in {line!r}"
                current = (language, number + 1, "no-run" not in options)
    assert current is None, f"{path}: a code block is not closed"
    return blocks


def shown_values(source):
    """`{line: shown text}` of the `# -> value` comments of `source`."""
    shown = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            match = SHOWN.match(token.string)
            if match:
                shown[token.start[0]] = match.group(1).strip()
    return shown


def statements_and_shown(source, doc):
    """`[(statement, shown text or None)]` of the top-level statements of
    `source`; every `# ->` belongs to an expression statement."""
    tree = ast.parse(source, filename=doc)
    shown = shown_values(source)
    lines = source.split("\n")
    result, used = [], set()
    for statement in tree.body:
        end = statement.end_lineno
        line = end if end in shown else end + 1
        own_line = line != end and line <= len(lines) and lines[line - 1].lstrip().startswith("#")
        value = shown.get(line) if (line == end or own_line) else None
        if value is not None:
            assert isinstance(statement, ast.Expr), (
                f"{doc}:{line}: `# ->` shows the value of an expression; line {statement.lineno} is not one")
            used.add(line)
        result.append((statement, value))
    stray = sorted(set(shown) - used)
    assert not stray, f"{doc}:{stray[0]}: `# ->` follows no expression statement"
    return result


def run_block(doc, line, code, namespace):
    """Runs one block in `namespace`, statement by statement, checking the shown values."""
    source = "\n" * (line - 1) + code  # line numbers as in the document
    for statement, shown in statements_and_shown(source, doc):
        where = f"{doc}:{statement.lineno}"
        try:
            if shown is not None:
                value = eval(compile(ast.Expression(statement.value), doc, "eval"), namespace)
            else:
                exec(compile(ast.Module([statement], type_ignores=[]), doc, "exec"), namespace)
        except Exception as error:
            raise AssertionError(f"{where}: {type(error).__name__}: {error}") from error
        if shown is not None:
            assert repr(value) == shown, f"{where}: shows {shown}, gives {value!r}"


def check_block(doc, line, code):
    """A no-run block: it compiles, and what it imports from this package exists."""
    source = "\n" * (line - 1) + code
    try:
        tree = ast.parse(source, filename=doc)
        compile(tree, doc, "exec")
    except SyntaxError as error:
        raise AssertionError(f"{doc}:{error.lineno}: {error.msg}") from error
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "keras_transformer":
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name) or _is_module(f"{node.module}.{alias.name}"), (
                    f"{doc}:{node.lineno}: {node.module} has no {alias.name!r}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "keras_transformer":
                    assert _is_module(alias.name), f"{doc}:{node.lineno}: no module {alias.name!r}"


def _is_module(name):
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        return False


def run_document(doc):
    """Runs (or checks) every python block of `doc` in order, in one namespace."""
    namespace = {"__name__": "__doc_blocks__"}
    for line, code, run in python_blocks(doc):
        if run:
            run_block(doc, line, code, namespace)
        else:
            check_block(doc, line, code)


WITH_PYTHON = [doc for doc in DOCUMENTS if python_blocks(doc)]


@pytest.mark.slow
@pytest.mark.parametrize("doc", WITH_PYTHON)
@pytest.mark.usefixtures("shipped_models")
def test_python_blocks_run(doc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_document(doc)


def test_the_documents_show_python_that_runs():
    # So that test_python_blocks_run never runs nothing.
    running = {doc for doc in WITH_PYTHON if any(run for _, _, run in python_blocks(doc))}
    assert {"README.md", os.path.join("docs", "decoding.md")} <= running, running


def _doc(tmp_path, text):
    path = tmp_path / "guide.md"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("text, message", [
    ("Text.\n\n```python\nx = 2\nx + 1  # -> 3\nx * 2\n# -> 5\n```\n", r"guide\.md:6: shows 5, gives 4"),
    ("```python\nx = 2  # -> 2\n```\n", r"guide\.md:2: `# ->` shows the value of an expression"),
    ("```python\nfrom keras_transformer import Translator\n\nTranslater\n```\n", r"guide\.md:4: NameError"),
], ids=["a wrong shown value", "a shown value after a statement", "an error names its line"])
def test_a_block_that_does_not_run_as_shown_fails_naming_its_line(tmp_path, text, message):
    with pytest.raises(AssertionError, match=message):
        run_document(_doc(tmp_path, text))


def test_a_no_run_block_is_compiled_and_its_imports_checked(tmp_path):
    ok = _doc(tmp_path, "```python no-run\nfrom keras_transformer.training import train\ntrain('base', data)\n```\n")
    run_document(ok)  # `data` is undefined: not run
    wrong = _doc(tmp_path, "```python no-run\nfrom keras_transformer.training import trian\n```\n")
    with pytest.raises(AssertionError, match=r"guide\.md:2: keras_transformer.training has no 'trian'"):
        run_document(wrong)
    broken = _doc(tmp_path, "```python no-run\nx = (\n```\n")
    with pytest.raises(AssertionError, match=r"guide\.md:2:"):
        run_document(broken)


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(doc):
    """`[(line, target)]` of the Markdown links of `doc` that are not URLs or anchors."""
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        lines = f.read().split("\n")
    return [(number, target) for number, line in enumerate(lines, 1) for target in LINK.findall(line)
            if not re.match(r"[a-z]+:|#", target)]


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_relative_links_lead_to_files(doc):
    for line, target in relative_links(doc):
        path = os.path.normpath(os.path.join(ROOT, os.path.dirname(doc), target.split("#")[0]))
        assert os.path.exists(path), f"{doc}:{line}: the link {target!r} leads to no file"
        assert os.path.commonpath([path, ROOT]) == ROOT, f"{doc}:{line}: {target!r} leads out of the repository"


def results_files(doc):
    """`[(line, name)]` of the benchmark results files `doc` names: a path under
    `benchmarks/results/`, or the bare name of a file of its performance table."""
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        lines = f.read().split("\n")
    found = []
    for number, line in enumerate(lines, 1):
        found += [(number, name) for name in re.findall(r"benchmarks/results/([\w.-]+\.json)", line)]
        if line.startswith("|"):  # a table row: its cells may name the file alone
            found += [(number, name) for name in re.findall(r"`([\w.-]+\.json)`", line)]
    return found


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_named_results_files_are_in_the_repository(doc):
    # Every figure of a performance table names its JSON; that file is committed with the figure.
    for line, name in results_files(doc):
        if os.path.isfile(os.path.join(ROOT, os.path.dirname(doc), name)):
            continue  # a file beside the document (a model card's training_summary.json)
        assert os.path.isfile(os.path.join(ROOT, "benchmarks", "results", name)), (
            f"{doc}:{line}: benchmarks/results/{name} is not in the repository")


def test_the_readme_performance_table_names_a_results_file_in_each_row():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    table = text.split("## Performance", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.split("\n") if line.startswith("|") and not line.startswith("| ---")][1:]
    assert rows, "README.md: no performance table"
    for row in rows:
        assert re.search(r"`[\w.-]+\.json`", row), f"README.md: a performance row names no results file: {row}"
