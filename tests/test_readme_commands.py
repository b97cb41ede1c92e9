"""Every command README.md shows in a ```bash block runs as written after the README's install.

Each command (a line of a bash block, continuation lines joined, `&&` chains
split, the comment after `#` dropped) is one test:

- install steps (`python3 -m venv`, `. .venv/bin/activate`, `pip install
  -e ".[extra]"`) name extras that setup.py declares;
- `keras-transformer ...` (and `python -m keras_transformer.cli ...`) parses
  with the real `argparse` parser, `python examples/wmt14.py ...` with the
  example's; every file, folder, preset and corpus such a command reads
  exists, unless an earlier README command writes it;
- the cheap ones run as processes, as written except their output directory
  (moved to a temporary one), with a timeout, all at once: `translate` with a
  preset or the SavedModel an earlier README `export` writes, once that one
  is done (a translate command's comment is its output), `evaluate` with
  `--limit`, `export` of a preset;
- the rest (training, serving, WMT14, the test suite) are checked as above
  and not run: too slow or long-running here, and run by their own tests.

A command the README shows before the code can run it goes into PENDING,
an xfail(strict=True) naming why. A command of a kind this file does not
know fails: add how to check it.
"""

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
RUN_TIMEOUT_S = 420  # all cheap commands together; about 60-90 s on 2 busy CPU cores

# Exact README command lines that cannot run yet -> why; each is an
# xfail(strict=True): once it works, the entry must go.
PENDING = {}


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


def readme_commands(path=README):
    """`[(line_number, argv, comment)]` of every command in the bash blocks of `path`."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    commands, in_bash, pending = [], False, None
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_bash = line.strip() == "```bash"
            continue
        if not in_bash:
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
        for bad in ("|", ";", ">", "<", "||", "&"):
            assert bad not in words, f"README.md:{start}: unsupported shell syntax {bad!r} in {code!r}"
        chain = [[]]
        for word in words:
            if word == "&&":
                chain.append([])
            else:
                chain[-1].append(word)
        for i, argv in enumerate(chain):
            # Only the chain's last command has the comment.
            commands.append((start, argv, comment if i == len(chain) - 1 else ""))
    return commands


COMMANDS = readme_commands()


def _id(command):
    number, argv, _ = command
    words = [w for w in argv[:3] if not w.startswith("-")]
    return f"L{number}-" + "-".join(re.sub(r"[^A-Za-z0-9_.]", "_", w)[:24] for w in words)


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
    """The paths a parsed command writes (the README's later commands may read them)."""
    return [getattr(args, name) for name in ("output_dir", "output") if getattr(args, name, None)]


def written_by_earlier(path, number):
    """Whether a README command before line `number` writes `path` or a folder above it."""
    path = os.path.normpath(path)
    for line, argv, _ in COMMANDS:
        if line >= number:
            break
        rest = cli_argv(argv)
        try:
            if rest is not None:
                args = parse_cli(rest)
            elif argv[:2] == ["python", "examples/wmt14.py"]:
                args = parse_example(argv[1:])
            else:
                continue
        except AssertionError:
            continue
        for out in outputs_of(args):
            out = os.path.normpath(out)
            if path == out or path.startswith(out + os.sep):
                return True
    return False


def check_path(what, path, number):
    assert os.path.exists(os.path.join(ROOT, path)) or written_by_earlier(path, number), (
        f"README.md:{number}: {what} {path!r} neither exists nor is written by an earlier README command"
    )


def check_model(model, number):
    from keras_transformer.presets import list_presets

    if model not in list_presets():
        check_path("MODEL", model, number)


def model_of(args):
    return args.model_dir if args.command == "serve" else args.model


def check_cli_inputs(args, number):
    """Every file, folder, preset and corpus the parsed command reads exists."""
    from keras_transformer import datasets

    if args.command in ("translate", "evaluate", "export", "serve"):
        check_model(model_of(args), number)
    corpus_file = getattr(args, "corpus_file", None)
    if corpus_file and not os.path.exists(os.path.join(ROOT, corpus_file)):
        # The user's download of the corpus's full file: the one that corpus is a split of.
        assert os.path.basename(corpus_file) == datasets.FULL_FILES.get(args.corpus), (number, corpus_file)
    for name in ("input", "tokenizer", "tsv", "weights", "model_card", "run_dir"):
        if getattr(args, name, None):
            check_path(f"--{name.replace('_', '-')}", getattr(args, name), number)
    if args.command == "average-checkpoints":
        for path in args.checkpoints:
            check_path("checkpoints", path, number)
    if args.command == "evaluate" and not args.tsv:
        sources, _ = datasets.load_references(args.corpus, args.split)
        assert sources, f"README.md:{number}: corpus {args.corpus!r} split {args.split!r} is empty"
    if args.command == "train":
        from keras_transformer.cli.train import SYNTHETIC_CORPORA, check_data_arguments

        check_data_arguments(args)  # one of --corpus and --train-file, the files there, no conflict
        if args.corpus is not None and args.corpus not in SYNTHETIC_CORPORA:
            assert datasets.load(args.corpus, "train"), f"README.md:{number}: corpus {args.corpus!r} is empty"
        for path in (args.train_file or []) + (args.valid_file or []):
            check_path("--train-file/--valid-file", path, number)
        if args.from_preset:
            check_model(args.from_preset, number)


def producer(path, runs):
    """`(line, output)` of the command of `runs` that writes `path` (its
    `output` or a folder inside), or None."""
    path = os.path.normpath(path)
    for line, argv, _ in runs:
        for out in outputs_of(parse_cli(cli_argv(argv))):
            if path == os.path.normpath(out) or path.startswith(os.path.normpath(out) + os.sep):
                return line, os.path.normpath(out)
    return None


def runnable(args, runs=()):
    """Why the command is not run here, or None for a cheap one that is
    (its model may come from one of the cheap commands `runs` before it)."""
    from keras_transformer.presets import list_presets

    if args.command not in ("translate", "evaluate", "export"):
        return f"`{args.command}` is not run here (slow or long-running; its own tests run it)"
    model = args.model
    if not (model in list_presets() or os.path.exists(os.path.join(ROOT, model)) or producer(model, runs)):
        return f"its model {model!r} comes from an earlier README command that is not run here"
    if args.command == "evaluate" and args.limit is None:
        return "evaluate without --limit translates the whole split (minutes on a CPU)"
    if args.command == "translate" and not args.text:
        return "translate of a file or standard input"
    return None


def run_argv(argv, out_dir):
    """`argv` with its output directory (`--output-dir`) moved to `out_dir`."""
    argv = list(argv)
    for flag in ("--output-dir", "--output"):
        for i, word in enumerate(argv):
            if word == flag:
                argv[i + 1] = os.path.join(out_dir, os.path.basename(os.path.normpath(argv[i + 1])))
            elif word.startswith(flag + "="):
                value = word.split("=", 1)[1]
                argv[i] = f"{flag}={os.path.join(out_dir, os.path.basename(os.path.normpath(value)))}"
    return argv


def cheap_commands():
    """The README commands that run here (`runnable`), PENDING ones left out."""
    cheap = []
    for command in COMMANDS:
        rest = cli_argv(command[1])
        if rest is None or " ".join(command[1]) in PENDING:
            continue
        try:
            args = parse_cli(rest)
        except AssertionError:
            continue  # test_readme_command reports it
        if runnable(args, cheap) is None:
            cheap.append(command)
    return cheap


RUNS = cheap_commands()


def start(command):
    env = dict(os.environ)
    env.pop("KERAS_BACKEND", None)  # a fresh shell after the README's install: the default backend
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # the venv, activated
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )


@pytest.fixture(scope="module")
def processes(tmp_path_factory):
    """The cheap commands, started together, each whose model an earlier
    one writes once that one is done: `{line: [argv as run, Popen or None,
    out_dir, (producer's line, its output) or None]}`."""
    started = {}
    for index, (number, argv, _) in enumerate(RUNS):
        out_dir = str(tmp_path_factory.mktemp(f"readme_L{number}"))
        command, args = run_argv(argv, out_dir), parse_cli(cli_argv(argv))
        made_by = None if args.command == "export" else producer(args.model, RUNS[:index])
        started[number] = [command, None if made_by else start(command), out_dir, made_by]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    yield started, deadline
    for _, popen, _, _ in started.values():
        if popen is not None and popen.poll() is None:
            popen.kill()
            popen.communicate(timeout=30)


def finished(processes, number):
    """`(argv, stdout, stderr, out_dir)` of the command of README line `number`; it must exit 0."""
    started, deadline = processes
    command, popen, out_dir, made_by = started[number]
    if popen is None:  # its model is the output of an earlier command: where that one wrote it
        line, output = made_by
        moved = os.path.join(finished(processes, line)[3], os.path.basename(output))
        model = os.path.normpath(parse_cli(cli_argv(command)).model)
        command = [moved + model[len(output):] if os.path.normpath(w) == model else w for w in command]
        popen = started[number][1] = start(command)
    try:
        stdout, stderr = popen.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.communicate(timeout=30)
        raise AssertionError(f"{command} ran past the {RUN_TIMEOUT_S} s timeout") from None
    assert popen.returncode == 0, f"{command} exited {popen.returncode}:\n{stderr[-3000:]}"
    return command, stdout, stderr, out_dir


def check_translate(args, comment, stdout):
    lines = stdout.rstrip("\n").split("\n")
    assert len(lines) == len(args.text) and all(line.strip() for line in lines), stdout
    if comment:  # the README's comment is the output it promises
        assert " | ".join(lines) == comment, (lines, comment)


def check_evaluate(args, stdout):
    from keras_transformer import Translator, datasets
    from keras_transformer.evaluation import corpus_bleu

    sources, references = datasets.load_references(args.corpus, args.split)
    sources, references = sources[: args.limit], references[: args.limit]
    assert f"{len(sources)} sources" in stdout.split("\n"), stdout
    bleu = re.search(r"^BLEU = ([0-9.]+) ", stdout, re.M)
    chrf = re.search(r"^chrF2 = ([0-9.]+) ", stdout, re.M)
    assert bleu and chrf, stdout
    # The scores of the preset's translations made here, in this process, against every reference.
    expected_bleu, _, expected_chrf, _ = corpus_bleu(Translator.from_preset(args.model).translate(sources), references)
    assert (bleu.group(1), chrf.group(1)) == (f"{expected_bleu.score:.2f}", f"{expected_chrf.score:.2f}"), stdout


def check_export(args, stdout, out_dir):
    from keras_transformer import presets

    target = os.path.join(out_dir, os.path.basename(os.path.normpath(args.output_dir)))
    version = os.path.join(target, "1")
    assert stdout.strip().endswith(f"Exported {version}"), stdout
    assert os.path.isfile(os.path.join(version, "saved_model.pb"))
    with open(os.path.join(version, "assets.extra", "metadata.json"), encoding="utf-8") as f:
        metadata = json.load(f)
    if args.model in presets.list_presets() or os.path.isfile(os.path.join(ROOT, args.model, "config.json")):
        with open(os.path.join(presets.preset_directory(args.model), "metadata.json"), encoding="utf-8") as f:
            assert metadata["preset_metadata"] == json.load(f) and metadata["preset"] == args.model
    if args.buckets:
        assert metadata["buckets"][:-1] == sorted(args.buckets), metadata["buckets"]


@pytest.mark.parametrize(
    "command",
    [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=PENDING[" ".join(c[1])]))
     if " ".join(c[1]) in PENDING else c for c in COMMANDS],
    ids=_id,
)
def test_readme_command(command):
    """Parsed by the real parser; what it reads exists (the cheap ones also run, below)."""
    number, argv, comment = command
    assert argv, f"README.md:{number}: an empty command"
    rest = cli_argv(argv)
    if rest is not None:
        check_cli_inputs(parse_cli(rest), number)
    elif argv[:2] in (["python", "examples/wmt14.py"], ["python3", "examples/wmt14.py"]):
        parse_example(argv[1:])  # not run: 25 minutes on 2 CPU cores (tests/test_examples.py runs it shorter)
    elif argv[:3] in (["python3", "-m", "venv"], ["python", "-m", "venv"]):
        assert argv[3:] == [".venv"], argv
    elif argv[0] == ".":
        assert argv[1:] == [".venv/bin/activate"], argv
    elif argv[:2] == ["pip", "install"]:
        assert "-e" in argv, argv
        target = argv[argv.index("-e") + 1]
        match = re.fullmatch(r"\.(?:\[([a-z0-9_,-]+)\])?", target)
        assert match, f"README.md:{number}: installs {target!r}, not this checkout"
        extras = set(match.group(1).split(",")) if match.group(1) else set()
        assert extras <= setup_extras(), f"README.md:{number}: extras {extras - setup_extras()} not in setup.py"
    elif argv[:1] == ["bash"]:
        assert os.path.isfile(os.path.join(ROOT, argv[1])), argv  # the suite itself: not run from the suite
    elif argv[:1] == ["curl"]:
        # Talks to the server of the README's `serve` command (not run here:
        # tests/serving/test_serve_command.py serves as a process).
        url = next(w for w in argv if "localhost:" in w)
        port, name = re.fullmatch(r"(?:http://)?localhost:(\d+)/v1/models/([^/:]+)(?::predict)?", url).groups()
        served = [parse_cli(cli_argv(a)) for n, a, _ in COMMANDS if n < number and cli_argv(a) and cli_argv(a)[:1] == ["serve"]]
        assert served, f"README.md:{number}: curl before any serve command"
        served = served[-1]
        assert (served.port, served.name or os.path.basename(os.path.normpath(served.model_dir))) == (int(port), name)
    elif argv[:2] == ["docker", "run"]:
        # No Docker engine here (the README says so): an earlier command writes the folder it mounts,
        # under the model's name.
        mount = argv[argv.index("-v") + 1].replace("$PWD", ROOT)
        host, container = mount.split(":")
        check_path("the mounted folder", os.path.relpath(host, ROOT), number)
        assert f"MODEL_NAME={os.path.basename(container)}" in argv, argv
    else:
        pytest.fail(f"README.md:{number}: no check for {' '.join(argv)!r}; add one to this file")


@pytest.mark.slow
@pytest.mark.parametrize("command", RUNS, ids=_id)
def test_readme_command_runs(command, processes):
    number, argv, comment = command
    args = parse_cli(cli_argv(argv))
    _, stdout, _, out_dir = finished(processes, number)
    {"translate": lambda: check_translate(args, comment, stdout),
     "evaluate": lambda: check_evaluate(args, stdout),
     "export": lambda: check_export(args, stdout, out_dir)}[args.command]()


def test_the_readme_shows_each_cheap_command_kind():
    # So that test_readme_command_runs is never an empty, silently skipped set.
    from keras_transformer.presets import list_presets

    parsed = [parse_cli(cli_argv(argv)) for _, argv, _ in RUNS]
    kinds = {(args.command, args.model in list_presets()) for args in parsed}
    assert {("translate", True), ("translate", False), ("evaluate", True), ("export", True)} <= kinds, kinds


def test_pending_commands_are_still_in_the_readme():
    shown = {" ".join(argv) for _, argv, _ in COMMANDS}
    assert set(PENDING) <= shown, set(PENDING) - shown


def test_readme_commands_are_read_as_a_shell_reads_them(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "```bash\npip install -e \".[x]\" && keras-transformer translate m \"a # b\" \\\n"
        "    --batch-size 2   # c d\n# output\n```\n```python\nkeras-transformer no\n```\n",
        encoding="utf-8",
    )
    assert readme_commands(str(readme)) == [
        (2, ["pip", "install", "-e", ".[x]"], ""),
        (2, ["keras-transformer", "translate", "m", "a # b", "--batch-size", "2"], "c d"),
    ]


ZOO_CARDS = sorted(
    os.path.join(ROOT, "keras_transformer", "zoo", name, "README.md")
    for name in os.listdir(os.path.join(ROOT, "keras_transformer", "zoo"))
)


@pytest.mark.parametrize("card", ZOO_CARDS, ids=lambda path: os.path.basename(os.path.dirname(path)))
def test_each_zoo_card_reproduces_with_commands_that_exist(card):
    # A card's Reproduce block: train, then preset of that run, then evaluate of that preset,
    # each accepted by today's parser, on the corpus the preset was trained on.
    from keras_transformer import presets

    argvs = [cli_argv(argv) for _, argv, _ in readme_commands(card)]
    assert argvs and None not in argvs, card
    train, preset, evaluate = (parse_cli(argv) for argv in argvs)
    assert (train.command, preset.command, evaluate.command) == ("train", "preset", "evaluate")
    assert preset.run_dir == train.output_dir and evaluate.model == preset.output
    name = os.path.basename(os.path.dirname(card))
    assert train.corpus == evaluate.corpus == presets.load_metadata(name).get("data", {"corpus": train.corpus})["corpus"]
    config = presets.load_model(name, load_weights=False).transformer_config
    from keras_transformer.models.config import architecture_config

    expected = architecture_config(train.architecture, vocab_size=train.vocab_size)
    assert (expected.vocab_size, expected.num_layers, expected.d_model, expected.d_ff) == (
        config.vocab_size, config.num_layers, config.d_model, config.d_ff)
