"""`translate --scores/--n-best/--alignments/--sampling-*` and `score`: the
command line returns what `Translator.hypotheses` and `Translator.score` do."""

import json

import pytest

from keras_transformer import RandomSampler, Translator
from keras_transformer.cli import main
from keras_transformer.translator import prediction
from tests.helpers import assert_rows_close

SOURCES = ["The cat is sleeping on the red sofa.", "", "Where is the station?"]


@pytest.fixture(scope="module")
def translator():
    return Translator.from_preset("tatoeba_en_fr")


def json_lines(text):
    return [json.loads(line) for line in text.splitlines()]


def test_translate_writes_the_n_best_with_scores_and_alignments_as_json_lines(translator, capsys):
    assert main(["translate", "tatoeba_en_fr", *SOURCES, "--n-best", "2", "--alignments"]) == 0
    rows = json_lines(capsys.readouterr().out)
    expected = [prediction(h, n_best=2, alignments=True) for h in translator.hypotheses(SOURCES, 2, alignments=True)]
    assert_rows_close(rows, expected)
    assert len(rows[0]["nbest_translations"]) == 2 and rows[0]["alignments"].count("-") == 7  # 7 French words
    assert main(["translate", "tatoeba_en_fr", *SOURCES, "--scores"]) == 0
    assert_rows_close(json_lines(capsys.readouterr().out), [prediction(h) for h in translator.hypotheses(SOURCES)])


def test_translate_samples_with_the_sampling_options(translator, capsys):
    assert main(["translate", "tatoeba_en_fr", *SOURCES, "--sampling-topk", "5", "--sampling-temperature", "1.5",
                 "--seed", "3"]) == 0
    sampler = RandomSampler(top_k=5, temperature=1.5, seed=3)
    assert capsys.readouterr().out.splitlines() == translator.translate(SOURCES, sampler=sampler)


def test_score_writes_each_pairs_scores_as_json_lines(translator, tmp_path, capsys):
    pairs = [("I love you.", "Je t'aime."), ("I love you.", "Je vous aime."), ("Hello!", "Bonjour !")]
    (tmp_path / "pairs.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    assert main(["score", "tatoeba_en_fr", "--pairs", str(tmp_path / "pairs.tsv")]) == 0
    rows = json_lines(capsys.readouterr().out)
    expected = [s.prediction() for s in translator.score(*map(list, zip(*pairs)))]
    assert_rows_close(rows, expected)
    assert rows[0]["scores"] > rows[1]["scores"] and rows[0]["tokens"][-1] == "</s>"


@pytest.mark.parametrize("flags, message", [
    (["--n-best", "5"], r"`n_best` must be at most `beam_size`=4. Received: n_best=5"),
    (["--n-best", "2", "--seed", "1"], r"`n_best` must be 1. Received: n_best=2"),
    (["--sampling-topp", "1.5"], r"`top_p` must be a number in \(0, 1\]. Received: top_p=1.5"),
])
def test_bad_output_options_are_refused(flags, message):
    with pytest.raises(ValueError, match=message):
        main(["translate", "tatoeba_en_fr", "Hi.", *flags])


def test_score_refuses_three_files_and_names_a_missing_one(tmp_path):
    with pytest.raises(SystemExit, match="one TSV file or a source and a target file"):
        main(["score", "tatoeba_en_fr", "--pairs", "a", "b", "c"])
    with pytest.raises(FileNotFoundError, match="missing.tsv"):
        main(["score", "tatoeba_en_fr", "--pairs", str(tmp_path / "missing.tsv")])


def test_the_decoding_guides_examples_run_as_written(tmp_path, monkeypatch, capsys):
    # Its Python blocks in order, in one namespace; each command of its bash blocks.
    import os
    import re
    import shlex
    import subprocess

    guide = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "decoding.md"), encoding="utf-8").read()
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for language, block in re.findall(r"```(python|bash)\n(.*?)```", guide, re.S):
        if language == "python":
            exec(block, namespace)  # noqa: S102 - the guide's own example
            continue
        for line in block.splitlines():
            code = line.split(" #")[0].strip()
            if code.startswith("keras-transformer "):
                assert main(shlex.split(code)[1:]) == 0, code
            else:
                assert code.startswith("printf "), f"a command this test does not know: {code!r}"
                subprocess.run(["bash", "-c", code], check=True)
    assert [round(s.score, 3) for s in namespace["scored"]] == [-0.692, -1.426]  # as the guide says
    assert json.loads(capsys.readouterr().out.splitlines()[0])["alignments"] == "0-0 1-1 3-2 4-3 5-4 7-5 6-6"
