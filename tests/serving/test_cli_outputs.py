"""`translate --scores/--n-best/--alignments/--sampling-*` and `score`: the
command line returns what `Translator.hypotheses` and `Translator.score` do,
in the commands of docs/decoding.md, which run as written."""

import json

import pytest

from keras_transformer import Translator
from keras_transformer.cli import main
from keras_transformer.translator import prediction
from tests.helpers import assert_rows_close

@pytest.fixture(scope="module")
def translator():
    return Translator.from_preset("tatoeba_en_fr")


def json_lines(text):
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("flags, message", [
    (["--n-best", "5"], r"`n_best` must be at most `beam_size`=4. Received: n_best=5"),
    (["--n-best", "2", "--sampling-topk", "5", "--seed", "1"], r"`n_best` must be 1. Received: n_best=2"),
    (["--sampling-topp", "1.5"], r"`top_p` must be a number in \(0, 1\]. Received: top_p=1.5"),
    (["--seed", "5"], r"--seed applies to sampling: give --sampling-topk, --sampling-topp or --sampling-temperature"),
])
def test_bad_output_options_are_refused(flags, message):
    with pytest.raises(ValueError, match=message):
        main(["translate", "tatoeba_en_fr", "Hi.", *flags])


def test_score_refuses_three_files_and_names_a_missing_one(tmp_path):
    with pytest.raises(SystemExit, match="one TSV file or a source and a target file"):
        main(["score", "tatoeba_en_fr", "--pairs", "a", "b", "c"])
    with pytest.raises(FileNotFoundError, match="missing.tsv"):
        main(["score", "tatoeba_en_fr", "--pairs", str(tmp_path / "missing.tsv")])


def expected_output(translator, argv):
    """What `keras-transformer ARGV` writes, from the `Translator`'s Python API."""
    from keras_transformer.cli import parse_arguments
    from keras_transformer.cli.common import output_options
    from keras_transformer.data.training_data import read_files

    args = parse_arguments(argv)
    if args.command == "score":
        sources, targets = map(list, zip(*read_files(args.pairs)))
        return [s.prediction() for s in translator.score(sources, targets)]
    outputs, sampler = output_options(args)
    texts = args.text
    if args.input:  # a file, a sentence a line
        with open(args.input, encoding="utf-8") as f:
            texts = f.read().splitlines()
    if outputs is None:
        return translator.translate(texts, sampler=sampler)
    return [prediction(h, **outputs) for h in translator.hypotheses(texts, sampler=sampler, **outputs)]


def test_the_decoding_guides_examples_run_as_written_and_return_what_python_does(translator, tmp_path, monkeypatch,
                                                                                  capsys):
    # Each command of its bash blocks, whose output is the Python API's and,
    # where the guide shows it, that output (its Python blocks and the values
    # they show run in tests/test_docs_code.py).
    import os
    import re
    import shlex
    import subprocess

    from keras_transformer.cli import parse_arguments
    from tests.test_readme_commands import check_translate, document_commands

    guide = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "decoding.md"), encoding="utf-8").read()
    shown = [c for c in document_commands("docs/decoding.md")
             if c.run and c.argv[1:2] == ["translate"] and (c.comment or c.shown)]
    monkeypatch.chdir(tmp_path)
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


def test_score_options_and_translate_scores_reach_the_output(translator, tmp_path, monkeypatch, capsys):
    # score --output writes the file (nothing on standard output), in batches
    # of --batch-size pairs, with --alpha's length penalty (0: scores are the
    # totals; the default's are not); translate --scores gives JSON lines.
    import keras

    from keras_transformer.decoding import runner

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("Hi.\tSalut.\nI am here.\tJe suis ici.\nThank you.\tMerci.\n", encoding="utf-8")
    batches = []
    force_decode = runner.force_decode

    def counted(model, source, target, *args):
        batches.append(int(keras.ops.shape(source)[0]))
        return force_decode(model, source, target, *args)

    monkeypatch.setattr(runner, "force_decode", counted)
    out = tmp_path / "scores.jsonl"
    argv = ["score", "tatoeba_en_fr", "--pairs", str(pairs), "--output", str(out), "--batch-size", "2",
            "--alpha", "0"]
    assert main(argv) == 0
    assert capsys.readouterr().out == "" and batches == [2, 1]
    rows = json_lines(out.read_text(encoding="utf-8"))
    assert_rows_close(rows, [s.prediction() for s in Translator(translator.model, translator.tokenizer, alpha=0.0).score(
        ["Hi.", "I am here.", "Thank you."], ["Salut.", "Je suis ici.", "Merci."])])
    assert all(row["scores"] == row["totals"] for row in rows)
    default = [s.prediction() for s in translator.score(["I am here."], ["Je suis ici."])][0]
    assert default["scores"] != default["totals"]

    argv = ["translate", "tatoeba_en_fr", "Hi.", "--scores"]
    assert main(argv) == 0
    assert_rows_close(json_lines(capsys.readouterr().out), expected_output(translator, argv))
