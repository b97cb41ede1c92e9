"""Every command that README.md and the guides in docs/ show in a ```bash block
works as written after the README's install.

Each command (a line of a bash block, continuation lines joined, `&&` chains
split, the comment after `#` dropped, `NAME=value` words before it taken as
its environment) is one test:

- install steps (`python3 -m venv`, `. .venv/bin/activate`, `pip install
  -e ".[extra]"` or `uv pip install -e ".[extra]"`) install this checkout
  with extras that setup.py declares, or uv itself (`pip install "uv>=0.5"`);
- `keras-transformer ...` (and `python -m keras_transformer.cli ...`) parses
  with the real `argparse` parser, `python examples/wmt14.py ...` with the
  example's; every file, folder, preset and corpus such a command reads
  exists, unless an earlier command of the same document writes it
  (`printf ... > FILE` writes FILE);
- a `translate` of sentences given as arguments, in a ```bash block, whose
  comment (or the ```json block right after its bash block) shows its
  output, runs in this process with the preset behind its model (itself,
  or the preset an earlier `export` of the same document exported with the
  defaults), and prints that output; docs/decoding.md's commands run in
  tests/serving/test_cli_outputs.py;
- every other command (installing, training, exporting, serving,
  evaluating, WMT14, the test suite, files and standard input, and every
  command of a ```bash no-run block) is checked as above and not run: each
  kind runs in the tests of what it does.

A command a document shows before the code can run it goes into PENDING,
an xfail(strict=True) naming why. A command of a kind this file does not
know fails: add how to check it. Errors name the document and line, as
`docs/serving.md:42:`.
"""

import argparse
import ast
import glob
import json
import os
import re
import shlex
from typing import NamedTuple, Optional

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
# README.md first, then the guides and the model cards: the documents whose commands are tested.
DOCUMENTS = ["README.md"] + sorted(
    os.path.relpath(p, ROOT)
    for pattern in (("docs", "*.md"), ("keras_transformer", "zoo", "*", "README.md"))
    for p in glob.glob(os.path.join(ROOT, *pattern))
)

# Exact command lines that cannot run yet -> why; each is an
# xfail(strict=True): once it works, the entry must go.
PENDING = {}


class Command(NamedTuple):
    doc: str  # the document, relative to the repository
    line: int  # where the command starts
    argv: list
    comment: str  # what follows `#`: for translate, its output
    run: bool = True  # False in a ```bash no-run block
    env: tuple = ()  # (NAME, value) pairs before the command
    writes: Optional[str] = None  # the file of `printf ... > FILE`
    shown: Optional[str] = None  # the ```json block right after its bash block

    @property
    def where(self):
        return f"{self.doc}:{self.line}"


def split_comment(line):
    """`(code, comment)`: the line cut at its first `#` outside quotes that starts a word."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def fence_info(line):
    """`(language, options)` of a ```fence line."""
    words = line.strip()[3:].split()
    return (words[0] if words else ""), words[1:]


def document_commands(path):
    """`[Command]` of every command in the bash blocks of `path` (absolute or
    relative to the repository)."""
    doc = os.path.relpath(os.path.join(ROOT, path), ROOT)
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    commands, in_block, in_bash, run, pending = [], False, False, True, None
    last_bash_end, json_start = None, None
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            if in_block:  # the fence that closes a block
                if json_start is not None and commands and commands[-1].doc == doc:
                    shown = "\n".join(lines[json_start:number - 1])
                    commands[-1] = commands[-1]._replace(shown=shown)
                if in_bash:
                    last_bash_end = number
                in_block, in_bash, json_start = False, False, None
                continue
            language, options = fence_info(line)
            in_block, in_bash = True, language == "bash"
            if in_bash:
                assert set(options) <= {"no-run"}, f"{doc}:{number}: unknown bash block option in {line!r}"
                run = "no-run" not in options
            elif language == "json" and last_bash_end is not None and not any(
                    text.strip() for text in lines[last_bash_end:number - 1]):
                json_start = number  # output of the bash block just above
            last_bash_end = None if not in_bash else last_bash_end
            continue
        if not in_bash:
            if line.strip():
                last_bash_end = None
            continue
        if pending is not None:  # a continuation
            start, text = pending
            line = text + " " + line.strip()
        else:
            start = number
        if line.rstrip().endswith("\\"):
            pending = (start, line.rstrip()[:-1].rstrip())
            continue
        pending = None
        code, comment = split_comment(line)
        if not code.strip():
            continue  # a comment line: output shown, not a command
        words = shlex.split(code)
        writes = None
        if words[:1] == ["printf"] and words.count(">") == 1 and words[-2] == ">":
            words, writes = words[:-2], words[-1]  # printf ... > FILE writes FILE
        for bad in ("|", ";", ">", ">>", "<", "||", "&"):
            assert bad not in words, f"{doc}:{start}: unsupported shell syntax {bad!r} in {code!r}"
        chain = [[]]
        for word in words:
            if word == "&&":
                chain.append([])
            else:
                chain[-1].append(word)
        for i, argv in enumerate(chain):
            env = []
            while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", argv[0]):
                env.append(tuple(argv.pop(0).split("=", 1)))
            last = i == len(chain) - 1
            # Only the chain's last command has the comment.
            commands.append(Command(doc, start, argv, comment if last else "", run, tuple(env),
                                    writes if last else None))
    return commands


def readme_commands(path=README):
    """`[(line_number, argv, comment)]` of every command in the bash blocks of `path`."""
    return [(c.line, c.argv, c.comment) for c in document_commands(path)]


COMMANDS = [command for doc in DOCUMENTS for command in document_commands(doc)]


def _id(command):
    words = [w for w in command.argv[:3] if not w.startswith("-")]
    return f"{command.doc}:L{command.line}-" + "-".join(re.sub(r"[^A-Za-z0-9_.]", "_", w)[:24] for w in words)


def setup_extras():
    """The `extras_require` keys of setup.py, read with `ast` (no install needed)."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "extras_require":
            return {key.value for key in node.value.keys}
    raise AssertionError("setup.py has no extras_require")


def cli_argv(argv):
    """The CLI's arguments, if `argv` runs `keras-transformer`, else None."""
    if argv[:1] == ["keras-transformer"]:
        return argv[1:]
    if argv[:3] in (["python", "-m", "keras_transformer.cli"], ["python3", "-m", "keras_transformer.cli"]):
        return argv[3:]
    return None


def parse_cli(argv):
    from keras_transformer.cli import parse_arguments

    try:
        return parse_arguments(argv)
    except SystemExit as exit:
        raise AssertionError(f"keras-transformer's parser refuses {argv} (exit {exit.code})") from None


def parse_example(argv):
    import importlib.util

    path = os.path.join(ROOT, argv[0])
    assert os.path.isfile(path), f"no file {argv[0]!r}"
    spec = importlib.util.spec_from_file_location("readme_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines `parser` and functions only
    try:
        return module.parser.parse_args(argv[1:])
    except SystemExit as exit:
        raise AssertionError(f"{argv[0]}'s parser refuses {argv[1:]} (exit {exit.code})") from None


def outputs_of(args):
    """The paths a parsed command writes (a document's later commands may read them)."""
    return [getattr(args, name) for name in ("output_dir", "output") if getattr(args, name, None)]


def command_outputs(command):
    """The paths `command` writes."""
    if command.writes:
        return [command.writes]
    rest = cli_argv(command.argv)
    try:
        if rest is not None:
            return outputs_of(parse_cli(rest))
        if command.argv[:2] in (["python", "examples/wmt14.py"], ["python3", "examples/wmt14.py"]):
            return outputs_of(parse_example(command.argv[1:]))
    except AssertionError:
        pass  # test_document_command reports it
    return []


def written_by_earlier(path, command):
    """Whether a command of `command`'s document before it writes `path` or a folder above it."""
    path = os.path.normpath(path)
    for earlier in COMMANDS:
        if earlier.doc != command.doc or earlier.line >= command.line:
            continue
        for out in command_outputs(earlier):
            out = os.path.normpath(out)
            if path == out or path.startswith(out + os.sep):
                return True
    return False


def check_path(what, path, command):
    assert os.path.exists(os.path.join(ROOT, path)) or written_by_earlier(path, command), (
        f"{command.where}: {what} {path!r} neither exists nor is written by an earlier command of {command.doc}"
    )


def check_model(model, command):
    from keras_transformer.models.presets import list_presets

    if model not in list_presets():
        check_path("MODEL", model, command)


def model_of(args):
    return args.model_dir if args.command == "serve" else args.model


def check_cli_inputs(args, command):
    """Every file, folder, preset and corpus the parsed command reads exists."""
    from keras_transformer import datasets

    if args.command in ("translate", "evaluate", "export", "serve", "score"):
        check_model(model_of(args), command)
    if args.command == "import" and not args.source.startswith("hf://"):  # a Hub name needs a network: not here
        check_path("SOURCE", args.source, command)
    corpus_file = getattr(args, "corpus_file", None)
    if corpus_file and not os.path.exists(os.path.join(ROOT, corpus_file)):
        # The user's download of the corpus's full file: the one that corpus is a split of.
        assert os.path.basename(corpus_file) == datasets.FULL_FILES.get(args.corpus), (command.where, corpus_file)
    for name in ("input", "tokenizer", "tsv", "weights", "model_card", "run_dir"):
        if getattr(args, name, None):
            check_path(f"--{name.replace('_', '-')}", getattr(args, name), command)
    for path in getattr(args, "pairs", None) or []:
        check_path("--pairs", path, command)
    if args.command == "average-checkpoints":
        for path in args.checkpoints:
            check_path("checkpoints", path, command)
    if args.command == "evaluate" and not args.tsv:
        sources, _ = datasets.load_references(args.corpus, args.split)
        assert sources, f"{command.where}: corpus {args.corpus!r} split {args.split!r} is empty"
    if args.command == "train":
        from keras_transformer.cli.train import SYNTHETIC_CORPORA, check_data_arguments

        if corpus_file and not os.path.exists(os.path.join(ROOT, corpus_file)):  # the user's download, checked above
            args = argparse.Namespace(**{**vars(args), "corpus_file": None})
        check_data_arguments(args)  # one of --corpus and --train-file, the files there, no conflict
        if args.corpus is not None and args.corpus not in SYNTHETIC_CORPORA:
            assert datasets.load(args.corpus, "train"), f"{command.where}: corpus {args.corpus!r} is empty"
        for path in (args.train_file or []) + (args.valid_file or []):
            check_path("--train-file/--valid-file", path, command)
        if args.from_preset:
            check_model(args.from_preset, command)


def preset_behind(model, command):
    """The shipped preset whose translations `model` gives: itself, or the
    preset that an earlier `export` of `command`'s document writes to the
    SavedModel folder `model` (a SavedModel translates as the preset it
    was exported from with the defaults: tests/export, and
    `Translator.from_saved_model`); else None."""
    from keras_transformer.models.presets import list_presets

    if model in list_presets():
        return model
    path = os.path.normpath(model)
    for earlier in COMMANDS:
        rest = cli_argv(earlier.argv)
        if earlier.doc != command.doc or earlier.line >= command.line or (rest or [None])[0] != "export":
            continue
        args = parse_cli(rest)
        out = os.path.normpath(args.output_dir)
        exported_with_defaults = rest[1:] == [args.model, "--output-dir", args.output_dir]
        if exported_with_defaults and args.model in list_presets() and (path == out or path.startswith(out + os.sep)):
            return args.model
    return None


def shown_output(command):
    """Why `command`'s output is not checked here, or None for a translate
    command of a ```bash block whose comment or ```json block shows its
    output: it runs in this process, with the preset behind its model.
    docs/decoding.md's commands are tests/serving/test_cli_outputs.py's, and
    every other command only parsed: each runs, in its own kind, in the
    tests of what it does."""
    if not command.run:
        return "shown in a ```bash no-run block"
    if command.doc == "docs/decoding.md":
        return "tests/serving/test_cli_outputs.py runs the guide's commands"
    rest = cli_argv(command.argv)
    if rest is None or rest[:1] != ["translate"] or command.env:
        return "not a translate command in a fresh shell's environment"
    if not (command.comment or command.shown):
        return "no output shown"
    args = parse_cli(rest)
    if not args.text or args.output:
        return "translate of a file or standard input"
    if preset_behind(args.model, command) is None:
        return f"its model {args.model!r} is neither a preset nor a preset's SavedModel exported with the defaults"
    return None


def run_as(command):
    """The arguments `command` runs with here: its model replaced by the preset behind it."""
    rest = cli_argv(command.argv)
    model = parse_cli(rest).model
    return tuple(preset_behind(model, command) if word == model else word for word in rest)


SHOWN = [c for c in COMMANDS if cli_argv(c.argv) is not None and shown_output(c) is None]
# {arguments: the commands that run so}: each run once.
SHOWN_RUNS = {}
for _command in SHOWN:
    SHOWN_RUNS.setdefault(run_as(_command), []).append(_command)


def check_translate(args, command, stdout):
    lines = stdout.rstrip("\n").split("\n")
    assert len(lines) == len(args.text) and all(line.strip() for line in lines), (command.where, stdout)
    structured = args.scores or args.n_best > 1 or args.alignments  # JSON lines (keras_transformer.cli.common)
    rows = [json.loads(line) for line in lines] if structured else None
    translations = [row["translations"] for row in rows] if structured else lines
    if command.comment:  # the document's comment is the output it promises
        assert " | ".join(translations) == command.comment, (command.where, translations, command.comment)
    if structured:
        for row in rows:
            assert isinstance(row["scores"], float) and row["translations"], (command.where, row)
            if args.n_best > 1:
                assert len(row["nbest_translations"]) == args.n_best, (command.where, row)
            if args.alignments:
                assert re.fullmatch(r"(\d+-\d+( \d+-\d+)*)?", row["alignments"]), (command.where, row)
    if command.shown:  # the JSON lines the document shows: their strings as output (numbers are shortened)
        shown = [json.loads(text) for text in re.split(r"\n(?=\{)", command.shown.strip())]
        assert len(shown) == len(rows), (command.where, shown, rows)
        for expected, row in zip(shown, rows):
            assert set(expected) == set(row), f"{command.where}: shown fields {sorted(expected)}, output {sorted(row)}"
            for name, value in expected.items():
                if isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                    assert row[name] == value, f"{command.where}: shown {name} {value!r}, output {row[name]!r}"


@pytest.mark.parametrize(
    "command",
    [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=PENDING[" ".join(c.argv)]))
     if " ".join(c.argv) in PENDING else c for c in COMMANDS],
    ids=_id,
)
def test_document_command(command):
    """Parsed by the real parser; what it reads exists (the cheap ones also run, below)."""
    argv, where = command.argv, command.where
    assert argv, f"{where}: an empty command"
    for name, value in command.env:
        if name == "KERAS_BACKEND":
            assert value in ("tensorflow", "jax", "torch"), f"{where}: KERAS_BACKEND={value}"
    rest = cli_argv(argv)
    if rest is not None:
        try:
            args = parse_cli(rest)
        except AssertionError as error:
            raise AssertionError(f"{where}: {error}") from None
        check_cli_inputs(args, command)
    elif argv[:2] in (["python", "examples/wmt14.py"], ["python3", "examples/wmt14.py"]):
        try:
            parse_example(argv[1:])  # not run: too long here (tests/test_examples.py runs it shorter)
        except AssertionError as error:
            raise AssertionError(f"{where}: {error}") from None
    elif argv[:3] in (["python3", "-m", "venv"], ["python", "-m", "venv"]):
        assert argv[3:] == [".venv"], (where, argv)
    elif argv[0] == ".":
        assert argv[1:] == [".venv/bin/activate"], (where, argv)
    elif argv[:2] == ["pip", "install"] and "-e" not in argv:
        # The test command's installer, from the package index.
        assert [w for w in argv[2:] if not w.startswith("-")] == ["uv>=0.5"], (where, argv)
    elif argv[:2] == ["pip", "install"] or argv[:3] == ["uv", "pip", "install"]:
        assert "-e" in argv, (where, argv)
        target = argv[argv.index("-e") + 1]
        match = re.fullmatch(r"\.(?:\[([a-z0-9_,-]+)\])?", target)
        assert match, f"{where}: installs {target!r}, not this checkout"
        extras = set(match.group(1).split(",")) if match.group(1) else set()
        assert extras <= setup_extras(), f"{where}: extras {extras - setup_extras()} not in setup.py"
    elif argv[:1] == ["bash"]:
        assert os.path.isfile(os.path.join(ROOT, argv[1])), (where, argv)  # the suite itself: not run from the suite
    elif argv[:1] == ["printf"]:
        assert command.writes and len(argv) >= 2, f"{where}: printf writes nothing a later command reads"
    elif argv[:1] == ["curl"]:
        # Talks to the server of the document's `serve` command (not run here:
        # tests/serving/test_serve_command.py serves as a process).
        url = next(w for w in argv if "localhost:" in w)
        port, name = re.fullmatch(r"(?:http://)?localhost:(\d+)/v1/models/([^/:]+)(?:/versions/\d+)?(?::predict|/metadata)?",
                                  url).groups()
        served = [parse_cli(cli_argv(c.argv)) for c in COMMANDS
                  if c.doc == command.doc and c.line < command.line and (cli_argv(c.argv) or [])[:1] == ["serve"]]
        assert served, f"{where}: curl before any serve command"
        served = served[-1]
        assert (served.port, served.name or os.path.basename(os.path.normpath(served.model_dir))) == (int(port), name)
    elif argv[:2] == ["docker", "run"]:
        # No Docker engine here (the documents say so): an earlier command writes the folder it mounts,
        # under the model's name.
        mount = argv[argv.index("-v") + 1].replace("$PWD", ROOT)
        host, container = mount.split(":")
        check_path("the mounted folder", os.path.relpath(host, ROOT), command)
        assert f"MODEL_NAME={os.path.basename(container)}" in argv, (where, argv)
    else:
        pytest.fail(f"{where}: no check for {' '.join(argv)!r}; add one to this file")


@pytest.mark.parametrize("argv", list(SHOWN_RUNS), ids=[_id(commands[0]) for commands in SHOWN_RUNS.values()])
def test_document_commands_print_the_output_they_show(argv, capsys):
    from keras_transformer.cli import main

    capsys.readouterr()
    assert main(list(argv)) == 0, argv
    out = capsys.readouterr().out
    for command in SHOWN_RUNS[argv]:  # each document line that shows it
        check_translate(parse_cli(cli_argv(command.argv)), command, out)


def test_the_documents_show_outputs_that_are_checked():
    # So that test_document_commands_print_the_output_they_show is never an
    # empty, silently skipped set: every translation the README shows is among them.
    readme = [c for c in COMMANDS if c.doc == "README.md" and (cli_argv(c.argv) or [None])[0] == "translate"
              and c.comment and c.run]
    assert readme and all(c in SHOWN for c in readme), [c.where for c in readme if c not in SHOWN]


def test_the_readme_starts_with_the_main_job_and_the_tests():
    # The project's rule: the README's first two command lines install and run the main job on the
    # shipped corpus, then install and run the tests; .ci/run runs the second as it is.
    with open(README, encoding="utf-8") as f:
        lines = f.read().split("\n")
    first, second = (lines[n - 1] for n in sorted({c.line for c in COMMANDS if c.doc == "README.md"})[:2])
    assert first.startswith("python3 -m venv .venv && ") and "python examples/wmt14.py" in first, first
    assert second.startswith("python3 -m venv .venv && ") and second.endswith("bash tests/run.sh"), second
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        assert second in f.read().split("\n"), second


def test_pending_commands_are_still_shown():
    shown = {" ".join(c.argv) for c in COMMANDS}
    assert set(PENDING) <= shown, set(PENDING) - shown


def test_commands_are_read_as_a_shell_reads_them(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "```bash\npip install -e \".[x]\" && keras-transformer translate m \"a # b\" \\\n"
        "    --batch-size 2   # c d\n# output\n```\n```python\nkeras-transformer no\n```\n"
        "```bash no-run\nprintf 'a\\tb\\n' > pairs.tsv\nKERAS_BACKEND=jax keras-transformer x\n```\n\n"
        "```json\n{\"a\": 1}\n```\n",
        encoding="utf-8",
    )
    assert readme_commands(str(readme)) == [
        (2, ["pip", "install", "-e", ".[x]"], ""),
        (2, ["keras-transformer", "translate", "m", "a # b", "--batch-size", "2"], "c d"),
        (10, ["printf", "a\\tb\\n"], ""),
        (11, ["keras-transformer", "x"], ""),
    ]
    commands = document_commands(str(readme))
    assert [c.run for c in commands] == [True, True, False, False]
    assert commands[2].writes == "pairs.tsv" and commands[3].env == (("KERAS_BACKEND", "jax"),)
    assert commands[3].shown == '{"a": 1}' and commands[1].shown is None


def test_unsupported_shell_syntax_names_the_document_and_line(tmp_path):
    doc = tmp_path / "guide.md"
    doc.write_text("text\n\n```bash\nkeras-transformer translate m a | head\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match=r"guide\.md:4: unsupported shell syntax '\|'"):
        document_commands(str(doc))


ZOO_CARDS = sorted(
    os.path.join(ROOT, "keras_transformer", "zoo", name, "README.md")
    for name in os.listdir(os.path.join(ROOT, "keras_transformer", "zoo"))
)


def card_commands(path):
    """`[(line, argv)]` of every command a model card shows anywhere: a
    `keras-transformer ...` or `python examples/wmt14.py ...` line of a code
    block of any kind or an indented one (continuation lines joined), or such
    an inline code span, even one wrapped over two lines."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    starts = ("keras-transformer ", "python examples/wmt14.py ", "python3 examples/wmt14.py ")
    found = []
    for match in re.finditer(r"`([^`]+)`", text):  # inline spans; a fence's backticks hold no command
        span = " ".join(match.group(1).split())
        if span.startswith(starts):
            found.append((text.count("\n", 0, match.start()) + 1, span))
    lines, number = text.split("\n"), 0
    while number < len(lines):
        line, start = lines[number].strip(), number + 1
        while line.endswith("\\") and number + 1 < len(lines):
            number += 1
            line = line[:-1].rstrip() + " " + lines[number].strip()
        if line.startswith(starts):
            found.append((start, split_comment(line)[0]))
        number += 1
    return [(line, shlex.split(command)) for line, command in found]


@pytest.mark.parametrize("card", ZOO_CARDS, ids=lambda path: os.path.basename(os.path.dirname(path)))
def test_every_command_a_zoo_card_shows_parses(card):
    # Its bash blocks, and the commands in its prose and other blocks too: a
    # card must not show a command that today's parsers refuse.
    commands = card_commands(card)
    assert commands, card
    for line, argv in commands:
        try:
            if cli_argv(argv) is not None:
                parse_cli(cli_argv(argv))
            else:
                parse_example(argv[1:])
        except AssertionError as error:
            raise AssertionError(f"{os.path.relpath(card, ROOT)}:{line}: {error}") from None


def test_card_commands_are_found_in_prose_blocks_and_spans(tmp_path):
    card = tmp_path / "README.md"
    card.write_text(
        "Run `keras-transformer translate\nm \"Hi.\"` now.\n\n"
        "    python examples/wmt14.py --bad-flag \\\n        --more   # old\n"
        "```bash\nkeras-transformer evaluate m --limit 2\n```\n",
        encoding="utf-8",
    )
    assert card_commands(str(card)) == [
        (1, ["keras-transformer", "translate", "m", "Hi."]),
        (4, ["python", "examples/wmt14.py", "--bad-flag", "--more"]),
        (7, ["keras-transformer", "evaluate", "m", "--limit", "2"]),
    ]
    with pytest.raises(AssertionError, match="refuses"):
        parse_example(["examples/wmt14.py", "--bad-flag"])


@pytest.mark.parametrize("card", ZOO_CARDS, ids=lambda path: os.path.basename(os.path.dirname(path)))
def test_each_zoo_card_reproduces_with_commands_that_exist(card):
    # A card's Reproduce block: train, then preset of that run, then evaluate of that preset,
    # each accepted by today's parser, on the corpus the preset was trained on.
    from keras_transformer.models import presets

    argvs = [cli_argv(argv) for _, argv, _ in readme_commands(card)]
    assert argvs and None not in argvs, card
    train, preset, evaluate = (parse_cli(argv) for argv in argvs)
    assert (train.command, preset.command, evaluate.command) == ("train", "preset", "evaluate")
    assert preset.run_dir == train.output_dir and evaluate.model == preset.output
    name = os.path.basename(os.path.dirname(card))
    # The corpus its files record: metadata.json's data, else training_summary.json's.
    with open(os.path.join(os.path.dirname(card), "training_summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    recorded = presets.load_metadata(name).get("data", {}).get("corpus") or summary.get("corpus") or summary["data"]
    assert train.corpus == evaluate.corpus == recorded, (card, train.corpus, evaluate.corpus, recorded)
    config = presets.load_model(name, load_weights=False).transformer_config
    from keras_transformer.models.config import architecture_config

    expected = architecture_config(train.architecture, vocab_size=train.vocab_size)
    assert (expected.vocab_size, expected.num_layers, expected.d_model, expected.d_ff) == (
        config.vocab_size, config.num_layers, config.d_model, config.d_ff)
