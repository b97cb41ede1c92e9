"""`translate --scores/--n-best/--alignments/--sampling-*` and `score`: the
command line returns what `Translator.hypotheses` and `Translator.score` do,
in the commands of docs/decoding.md, which run as written on the preset they
name. The other commands run on the tiny copying model of
tests/export/copying.py (its `.keras` file and tokenizer, tests/shared.py),
whose translations cost a fraction of the preset's: what they check is the
command line's options and files, whatever the model."""

import json
import os
import re

import pytest

from keras_transformer import Translator
from keras_transformer.cli import main
from keras_transformer.translation.translator import prediction
from tests.helpers import assert_rows_close, shipped_models  # noqa: F401 - a fixture


@pytest.fixture(scope="module")
def copying():
    """`(model file, tokenizer file)` of the copying model."""
    from tests import shared

    folder = shared.path("copying_export")
    return os.path.join(folder, "model.keras"), os.path.join(folder, "tokenizer.model")


@pytest.fixture(scope="module")
def translator(copying):
    """The copying model's `Translator`, read as the commands read their model and `--tokenizer`."""
    return Translator.load(*copying)


def model(copying, *argv):
    """A command's arguments with the copying model: its file, then `argv`, then `--tokenizer`."""
    return [copying[0], *argv, "--tokenizer", copying[1]]


def json_lines(text):
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("flags, message", [
    (["--n-best", "5"], r"`--n-best` must be at most `--beam-size`=4. Received: --n-best=5"),
    (["--n-best", "2", "--sampling-topk", "5", "--seed", "1"], r"`--n-best` must be 1. Received: --n-best=2"),
    (["--sampling-topp", "1.5"], r"`top_p` must be a number in \(0, 1\]. Received: top_p=1.5"),
    (["--seed", "5"], r"--seed applies to sampling: give --sampling-topk, --sampling-topp or --sampling-temperature"),
    (["--format", "html", "--n-best", "2"], r"--format html writes translations only: not with --scores"),
])
def test_bad_output_options_are_refused(copying, flags, message):
    with pytest.raises(ValueError, match=message):
        main(["translate", *model(copying, "Hi.", *flags)])


def test_translate_formats_keep_the_files_lines_and_equal_python(copying, translator, tmp_path, capsys):
    # Sentences the copying model learned, so that each has a translation to carry the markup.
    page = tmp_path / "page.html"
    page.write_text('<p>Hello <b>there</b>.\nHow are you?</p>\n<p translate="no">Keep me.</p>\n', encoding="utf-8")
    main(["translate", *model(copying, "--format", "html", "--input", str(page), "--output", str(tmp_path / "out"))])
    out = (tmp_path / "out").read_text(encoding="utf-8")
    assert out == translator.translate([page.read_text(encoding="utf-8")], format="html")[0]
    assert out.count("\n") == 3 and out.count("<b>") == 1 and '<p translate="no">Keep me.</p>' in out
    lines = ["The cat sleeps. See you tomorrow.", "", "It costs %s euros."]
    (tmp_path / "en.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    main(["translate", *model(copying, "--format", "text", "--input", str(tmp_path / "en.txt"))])
    out = capsys.readouterr().out
    assert out.splitlines() == translator.translate(lines) and out.count("%s") == 1
    with pytest.raises(SystemExit):
        main(["translate", *model(copying, "--format", "xml", "Hi.")])
    assert "invalid choice: 'xml'" in capsys.readouterr().err


def test_score_refuses_three_files_and_names_a_missing_one(copying, tmp_path):
    with pytest.raises(SystemExit, match="one TSV file or a source and a target file"):
        main(["score", *model(copying, "--pairs", "a", "b", "c")])
    with pytest.raises(FileNotFoundError, match="missing.tsv"):
        main(["score", *model(copying, "--pairs", str(tmp_path / "missing.tsv"))])


def test_score_rows_name_their_lines_and_an_over_long_pair_its_line(copying, translator, tmp_path, capsys):
    """With `--skip-bad-lines`, the rows of the pairs kept, each with its
    line; without, the first pair the model cannot score stops the command
    with its file and line."""
    long = " ".join(["mot"] * 600)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(f"I love you.\tJe t'aime.\nno tab\nHello.\t{long}\nThank you.\tMerci.\n", encoding="utf-8")
    assert main(["score", *model(copying, "--pairs", str(pairs), "--skip-bad-lines")]) == 0
    out, err = capsys.readouterr()
    rows = json_lines(out)
    assert_rows_close(rows, [{"line": line, **s.prediction()} for line, s in zip(
        (1, 4), translator.score(["I love you.", "Thank you."], ["Je t'aime.", "Merci."]))])
    assert re.search(r"skipped 1 line without a tab \(first: .*pairs.tsv:2", err), err
    assert re.search(r"skipped 1 pair\(s\) longer than the model scores \(first: .*pairs.tsv:3: the translation has "
                     r"\d+ tokens \(EOS included\); the model scores at most \d+\.\)", err), err
    pairs.write_text(f"I love you.\tJe t'aime.\nHello.\t{long}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"pairs.tsv:2: the translation has \d+ tokens .* --skip-bad-lines"):
        main(["score", *model(copying, "--pairs", str(pairs))])


def expected_output(translator, argv):
    """What `keras-transformer ARGV` writes, from the `Translator`'s Python API."""
    from keras_transformer.cli import parse_arguments
    from keras_transformer.cli.common import output_options
    from keras_transformer.training.training_data import read_files

    args = parse_arguments(argv)
    if args.command == "score":
        lines, pairs = zip(*read_files(args.pairs, numbered=True))
        sources, targets = map(list, zip(*pairs))
        return [{"line": line, **s.prediction()} for line, s in zip(lines, translator.score(sources, targets))]
    outputs, sampler = output_options(args)
    texts = args.text
    if args.input:  # a file, a sentence a line
        with open(args.input, encoding="utf-8") as f:
            texts = f.read().splitlines()
    if outputs is None:
        return translator.translate(texts, sampler=sampler)
    return [prediction(h, **outputs) for h in translator.hypotheses(texts, sampler=sampler, **outputs)]


@pytest.mark.usefixtures("shipped_models")
def test_the_decoding_guides_examples_run_as_written_and_return_what_python_does(tmp_path, monkeypatch, capsys):
    # Each command of its bash blocks, whose output is the Python API's and,
    # where the guide shows it, that output (its Python blocks and the values
    # they show run in tests/test_docs_code.py). The preset's Keras model is
    # read once: each command builds its own `Translator` on it, as
    # `Translator.load` of the preset does in a process of its own.
    import re
    import shlex
    import subprocess

    from keras_transformer.cli import parse_arguments
    from tests.test_readme_commands import check_translate, document_commands

    guide = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "decoding.md"), encoding="utf-8").read()
    shown = [c for c in document_commands("docs/decoding.md")
             if c.run and c.argv[1:2] == ["translate"] and (c.comment or c.shown)]
    monkeypatch.chdir(tmp_path)
    translator = Translator.load("tatoeba_en_fr")
    commands = checked = 0
    for block in re.findall(r"```bash\n(.*?)```", guide, re.S):
        for line in block.splitlines():
            code = line.split(" #")[0].strip()
            if code.startswith("printf "):
                subprocess.run(["bash", "-c", code], check=True)
                continue
            assert code.startswith("keras-transformer "), f"a command this test does not know: {code!r}"
            argv = shlex.split(code)[1:]
            assert main(argv) == 0, code
            printed = capsys.readouterr().out
            out, expected = printed.splitlines(), expected_output(translator, argv)
            if expected and isinstance(expected[0], dict):
                assert_rows_close(json_lines("\n".join(out)), expected)
            else:
                assert out == expected
            for command in shown:  # and the output the guide shows after it
                if command.argv[1:] == argv:
                    check_translate(parse_arguments(argv), command, printed)
                    checked += 1
            commands += 1
    assert commands == 3  # translate with n-best and alignments, score, sampling over a file
    assert checked == len(shown) > 0  # its JSON lines shown after the first


def test_score_options_and_translate_scores_reach_the_output(copying, translator, tmp_path, monkeypatch, capsys):
    # score --output writes the file (nothing on standard output), in batches
    # of --batch-size pairs, with --alpha's length penalty (0: scores are the
    # totals; the default's are not); translate --scores gives JSON lines.
    import keras

    from keras_transformer.translation import runner

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("Hi.\tSalut.\nI am here.\tJe suis ici.\nThank you.\tMerci.\n", encoding="utf-8")
    batches = []
    force_decode = runner.force_decode

    def counted(model, source, target, *args):
        batches.append(int(keras.ops.shape(source)[0]))
        return force_decode(model, source, target, *args)

    monkeypatch.setattr(runner, "force_decode", counted)
    out = tmp_path / "scores.jsonl"
    argv = ["score", *model(copying, "--pairs", str(pairs), "--output", str(out), "--batch-size", "2", "--alpha", "0")]
    assert main(argv) == 0
    assert capsys.readouterr().out == "" and batches == [2, 1]
    rows = json_lines(out.read_text(encoding="utf-8"))
    assert [row.pop("line") for row in rows] == [1, 2, 3]  # the file's lines
    assert_rows_close(rows, [s.prediction() for s in Translator(translator.model, translator.tokenizer, alpha=0.0).score(
        ["Hi.", "I am here.", "Thank you."], ["Salut.", "Je suis ici.", "Merci."])])
    assert all(row["scores"] == row["totals"] for row in rows)
    default = [s.prediction() for s in translator.score(["I am here."], ["Je suis ici."])][0]
    assert default["scores"] != default["totals"]

    argv = ["translate", *model(copying, "Hi.", "--scores")]
    assert main(argv) == 0
    assert_rows_close(json_lines(capsys.readouterr().out), expected_output(translator, argv))
