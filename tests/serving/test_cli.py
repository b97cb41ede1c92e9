"""Argument checks of the `translate`, `evaluate` and `serve` commands, before any model loads."""

import io
import sys

import numpy as np
import pytest

from keras_transformer.cli import main
from keras_transformer.decoding.defaults import BATCH_SIZE


COMMANDS = ["train", "average-checkpoints", "preset", "import", "export", "translate", "score", "evaluate", "serve"]


def test_help_lists_the_commands_and_each_commands_help_names_all_its_options(capsys):
    from keras_transformer.cli import build_parser

    with pytest.raises(SystemExit) as exit:
        main(["--help"])
    assert exit.value.code == 0
    text = capsys.readouterr().out
    assert all(name in text for name in COMMANDS), text
    commands = build_parser().commands
    assert sorted(commands) == sorted(COMMANDS)
    for name, parser in commands.items():
        with pytest.raises(SystemExit) as exit:
            main([name, "--help"])
        assert exit.value.code == 0
        text = capsys.readouterr().out
        assert text.startswith(f"usage: keras-transformer {name} "), text
        options = [option for action in parser._actions for option in action.option_strings]
        assert options and [option for option in options if option not in text] == [], name


@pytest.mark.parametrize(
    "argv, flag, value",
    [
        (["translate", "model", "--batch-size", "-1"], "--batch-size", "-1"),
        (["translate", "model", "--batch-size", "0"], "--batch-size", "0"),
        (["evaluate", "model", "--batch-size", "-1"], "--batch-size", "-1"),
        (["evaluate", "model", "--limit", "-5"], "--limit", "-5"),
    ],
)
def test_counts_must_be_positive(argv, flag, value, capsys):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    assert f"argument {flag}: must be an integer >= 1. Received: {value}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, words",
    [
        # The server's arguments, named as the command's flags (cli.in_flag_terms).
        (["--max-instances", "0"], "`--max-instances` must be a positive integer. Received: --max-instances=0"),
        (["--max-characters", "0"], "Received: --max-characters=0"),
        (["--request-timeout", "-1"], "Received: request_timeout_s=-1"),
        (["--max-batch-size", "4", "--max-instances", "10"], "Received: --max-instances=10"),
        (["--port", "70000"], "Received: --port=70000"),
        (["--intra-op-threads", "-1"], "Received: --intra-op-threads=-1"),
        (["--inter-op-threads", "-2"], "Received: --inter-op-threads=-2"),
    ],
)
def test_serve_limits_and_port_are_checked_before_loading(flags, words):
    with pytest.raises(ValueError, match=words):
        main(["serve", "no/such/model"] + flags)


def test_serve_flags_reach_the_server(monkeypatch):
    from keras_transformer.cli import common
    from keras_transformer.serving import server

    served, process = {}, {}
    monkeypatch.setattr(server, "serve", lambda model_dir, **kwargs: served.update(kwargs, model_dir=model_dir))
    monkeypatch.setattr(common, "set_tensorflow_process_options", lambda **kwargs: process.update(kwargs))
    assert main(["serve", "some/model", "--host", "0.0.0.0", "--port", "0", "--name", "fr", "--max-batch-size", "4",
                 "--max-body-bytes", "1000", "--max-characters", "50", "--request-timeout", "5",
                 "--intra-op-threads", "1", "--inter-op-threads", "2"]) == 0
    limits = served.pop("limits")
    assert served == dict(model_dir="some/model", host="0.0.0.0", port=0, name="fr")
    assert process == dict(intra_op_threads=1, inter_op_threads=2)  # the command's process, not the library
    assert (limits.max_batch_size, limits.max_body_bytes, limits.max_characters, limits.request_timeout_s) == (
        4, 1000, 50, 5.0)
    assert limits.max_instances == 4  # the default: at most the batch size
    main(["serve", "some/model", "--max-instances", "3"])
    assert served["limits"].max_instances == 3 and served["limits"].max_batch_size == BATCH_SIZE


def test_serve_accepts_port_0():  # a free port, printed once bound (test_serve_command.py)
    with pytest.raises(FileNotFoundError, match="no/such/model"):  # past the port check, at loading
        main(["serve", "no/such/model", "--port", "0"])


def test_sentences_may_follow_the_options():
    from keras_transformer.cli import parse_arguments

    args = parse_arguments(["translate", "model", "--batch-size", "8", "Hi.", "Bye."])
    assert (args.command, args.model, args.text, args.batch_size) == ("translate", "model", ["Hi.", "Bye."], 8)
    args = parse_arguments(["translate", "model", "Hi.", "--batch-size", "8"])
    assert (args.text, args.batch_size) == (["Hi."], 8)


@pytest.mark.parametrize(
    "argv, verbose",
    [
        (["translate", "model", "Hi."], False),
        (["--verbose", "translate", "model", "Hi."], True),
        (["translate", "model", "Hi.", "--verbose"], True),
        (["translate", "--verbose", "model", "Hi."], True),
    ],
)
def test_verbose_goes_before_or_after_the_command(argv, verbose):
    from keras_transformer.cli import parse_arguments

    args = parse_arguments(argv)
    assert (args.verbose, args.model, args.text) == (verbose, "model", ["Hi."])


def test_train_fit_verbosity_is_its_own_flag():
    from keras_transformer.cli import parse_arguments

    args = parse_arguments(["train", "--corpus", "c", "--output-dir", "o", "--fit-verbose", "2", "--verbose"])
    assert (args.fit_verbose, args.verbose) == ("2", True)


@pytest.mark.parametrize("missing", ["fastapi", "uvicorn"])
def test_serve_without_the_server_packages_names_the_extra(missing, monkeypatch, capsys):
    # A SystemExit with a message: Python prints it alone, without a
    # traceback, and exits 1; nothing else was written before it.
    import sys

    monkeypatch.setitem(sys.modules, missing, None)  # as if not installed
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit:
        main(["serve", "no/such/model"])
    assert exit.value.code == (
        f'keras-transformer serve needs the server packages ({missing} is missing): '
        'pip install -e ".[serve]" in the keras-transformer checkout'
    )
    assert capsys.readouterr() == ("", "")


def test_command_modules_import_nothing_from_the_main_module():
    import ast
    import os

    import keras_transformer.cli as cli

    folder = os.path.dirname(cli.__file__)
    assert sorted(command.__name__.rsplit(".", 1)[1] for command in cli.COMMANDS) == sorted(
        ["train", "average_checkpoints", "preset", "import_model", "export", "translate", "score", "evaluate", "serve"]
    )
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py") or name in ("__init__.py", "__main__.py"):
            continue
        tree = ast.parse(open(os.path.join(folder, name), encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module != "keras_transformer.cli", (name, ast.unparse(node))
            elif isinstance(node, ast.Import):
                assert all(alias.name != "keras_transformer.cli" for alias in node.names), (name, ast.unparse(node))


def test_train_names_an_unknown_corpus_before_claiming_the_directory(tmp_path):
    with pytest.raises(ValueError, match=r"`--corpus` must be one of \[.*'synthetic-copy'.*\]. Received: --corpus='nope'"):
        main(["train", "--corpus", "nope", "--output-dir", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()


def test_translate_batches_sentences_of_similar_length_and_keeps_the_input_order():
    from keras_transformer.cli.common import translate_sorted

    rng = np.random.default_rng(0)
    sentences = [" ".join(["w"] * int(n)) + f" {i}" for i, n in enumerate(rng.integers(1, 40, size=23))]
    batches = []

    def translate(batch):
        batches.append(batch)
        return [s.upper() for s in batch]

    assert translate_sorted(translate, sentences, 5) == [s.upper() for s in sentences]
    # Chunks of 5, 10 and 8 sentences (one batch, then twice as many), each
    # sorted by length and read in the input's order.
    assert [len(b) for b in batches] == [5, 5, 5, 5, 3]
    for chunk, first, end in ((batches[:1], 0, 5), (batches[1:3], 5, 15), (batches[3:], 15, 23)):
        lengths = [len(s) for b in chunk for s in b]
        assert lengths == sorted(lengths) and sorted(s for b in chunk for s in b) == sorted(sentences[first:end])
    assert translate_sorted(translate, [], 5) == []
    batches.clear()
    assert translate_sorted(translate, ["bb", "a", "bb", "a", "c"], 5) == ["BB", "A", "BB", "A", "C"]
    assert batches == [["a", "c", "bb"]]  # each distinct sentence once, shortest first


def test_input_lines_lose_their_line_ends_crlf_included(tmp_path, monkeypatch):
    from keras_transformer.cli import parse_arguments
    from keras_transformer.cli.translate import _sentences

    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfHello.\r\nWorld\r\n\r\nLast")  # a byte order mark too
    assert list(_sentences(parse_arguments(["translate", "model", "--input", str(path)]))) == ["Hello.", "World", "", "Last"]
    crlf = io.TextIOWrapper(io.BytesIO(b"Hello.\r\nWorld\r\n"), encoding="utf-8", newline="")  # as stdin may read
    monkeypatch.setattr(sys, "stdin", crlf)
    assert list(_sentences(parse_arguments(["translate", "model"]))) == ["Hello.", "World"]


def test_input_that_is_not_utf8_is_an_error_naming_it(tmp_path, monkeypatch):
    from keras_transformer.cli import parse_arguments
    from keras_transformer.cli.translate import _sentences

    path = tmp_path / "latin1.txt"
    path.write_bytes("Bonjour.\nOù est la gare ?\n".encode("latin-1"))
    with pytest.raises(SystemExit, match=r"--input '.*latin1.txt' is not UTF-8 text at line 2 \(invalid start byte: b'\\xf9'\)"):
        list(_sentences(parse_arguments(["translate", "model", "--input", str(path)])))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"caf\xe9\n"), encoding="utf-8"))
    with pytest.raises(SystemExit, match=r"standard input is not UTF-8 text at line 1"):
        list(_sentences(parse_arguments(["translate", "model"])))


def test_translate_refuses_to_write_over_its_input(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("Hello.\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="--output names the --input file"):
        main(["translate", "tatoeba_en_fr", "--input", str(path), "--output", str(tmp_path / "." / "in.txt")])
    assert path.read_text(encoding="utf-8") == "Hello.\n"
