"""Every path returns what the `Translator` does: the SavedModel's
signatures, the command line on a SavedModel and the REST API, for n-best
lists, confidences, alignments, sampling and scores; and on each, a
sentence translates alike alone and in a shuffled batch."""

import json
import urllib.error
import urllib.request

import numpy as np
import pytest

from keras_transformer import RandomSampler, Translator
from keras_transformer.cli import main
from keras_transformer.serving.predictor import Instance, Sampling, load_saved_model_predictor
from keras_transformer.serving.server import ServingLimits, create_app
from keras_transformer.translator import prediction
from tests.decoding.permuting import N_BEST, WORDS, permute, permuting_model, sentences
from tests.helpers import assert_rows_close

# A request's first call of a signature runs its graph functions for the
# first time: on a busy machine that may outlast the server's default
# timeout. The client's timeout decides here, and the server's is as long.
TIMEOUT_S = 300
LIMITS = ServingLimits(request_timeout_s=TIMEOUT_S)


@pytest.fixture(scope="module")
def exported():
    """`(translator, predict, SavedModel folder, held-out sentences)` of the
    permuting model, exported with every signature and its 3 best (tests/shared.py)."""
    from tests import shared

    model, tokenizer, _, held_out = permuting_model()
    folder = shared.path("permuting_export")
    predict, _ = load_saved_model_predictor(folder)
    assert predict.signatures == ["details", "sample", "score", "serving_default", "steer"]
    return Translator(model, tokenizer), predict, folder, held_out


def test_the_signatures_return_what_the_translator_does(exported):
    translator, predict, _, held_out = exported
    texts = held_out[:20] + ["", " ".join(held_out[:30])]  # blank, and long enough to split into windows
    rows = searched = predict([Instance(t, n_best=N_BEST, alignments=True) for t in texts])
    expected = [prediction(h, N_BEST, True) for h in translator.hypotheses(texts, N_BEST, alignments=True)]
    assert_rows_close(rows, expected)
    assert rows[-1]["alignments"].count("-") == len(rows[-1]["translations"].split())  # every target word linked
    sampling = Sampling(seed=4, temperature=2.0, top_k=5, top_p=0.9)
    sampler = RandomSampler(top_k=5, top_p=0.9, temperature=2.0, seed=4)
    rows = predict([Instance(t, confidences=True, sampling=sampling) for t in texts])
    assert_rows_close(rows, [prediction(h) for h in translator.hypotheses(texts, sampler=sampler)])
    # Target prefixes: each input's first word, which no permutation keeps
    # first; "" for none. Constraints: a word absent from the translation.
    prefixes = [t.split()[0] if i % 2 and t.strip() else "" for i, t in enumerate(texts)]
    constraints = [absent_word(searched[i]["translations"]) if i % 3 and t.strip() else [] for i, t in enumerate(texts)]
    rows = predict([Instance(t, n_best=N_BEST, target_prefix=p, constraints=c)
                    for t, p, c in zip(texts, prefixes, constraints)])
    found = translator.hypotheses(texts, N_BEST, target_prefix=prefixes, constraints=constraints)
    assert_rows_close(rows, [prediction(h, N_BEST) for h in found])
    assert all(row["translations"].startswith(p) for row, p in zip(rows, prefixes))
    assert all(set(c) <= set(row["translations"].split()) for row, c in zip(rows[:-1], constraints))
    with pytest.raises(ValueError, match=r"`target_prefix` and `constraints` force \d+ tokens; the translation may"):
        predict([Instance(texts[0], target_prefix="cat", constraints=["cat"] * 80)])
    pairs = [(s, permute(s)) for s in held_out[:10]] + [(held_out[0], "")]
    rows = predict([Instance(s, targets=t) for s, t in pairs])
    assert_rows_close(rows, [s.prediction() for s in translator.score(*map(list, zip(*pairs)))], atol=1e-4)


def test_a_sentence_translates_alike_alone_and_in_a_shuffled_batch(exported, run_server):
    translator, predict, _, held_out = exported
    batch = held_out + [s for s in sentences(200, seed=2) if s not in set(held_out)][: 64 - len(held_out)]
    shuffled = [batch[i] for i in np.random.default_rng(0).permutation(len(batch))]
    server = run_server(create_app(predict, "permuting", limits=LIMITS))
    alone_texts = held_out[:16]  # each alone; all of held_out in the batch
    for make, field in ((str, lambda t: t), (lambda t: Instance(t, n_best=2, alignments=True),
                                             lambda t: {"inputs": t, "n_best": 2, "alignments": True}),
                        (lambda t: Instance(t, sampling=Sampling(seed=5, temperature=2.0)),
                         lambda t: {"inputs": t, "sampling": {"seed": 5, "temperature": 2.0}})):
        alone = [predict([make(s)])[0] for s in alone_texts]
        together = dict(zip(shuffled, predict([make(t) for t in shuffled])))
        # The strings equal; the scores up to floating-point rounding.
        assert_rows_close(alone, [together[s] for s in alone_texts])
        status, body = post(server, {"instances": [field(t) for t in shuffled]})  # the REST API's batch
        assert status == 200
        assert_rows_close(alone, [dict(zip(shuffled, body["predictions"]))[s] for s in alone_texts])


def test_the_command_line_on_a_saved_model_returns_the_translators_outputs(exported, tmp_path, capsys):
    # The commands translate with the translator the folder was exported
    # from (`Translator.from_saved_model`), whatever signatures it has.
    translator, predict, folder, held_out = exported
    texts = held_out[:5]
    # More best translations than the export's 3, with alignments, each
    # starting with `word` and holding the other word, in one command.
    word = texts[0].split()[0]
    other = absent_word(" ".join(texts))
    assert main(["translate", folder, *texts, "--n-best", "4", "--alignments", "--target-prefix", word,
                 "--constraint", other[0]]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    found = translator.hypotheses(texts, 4, alignments=True, target_prefix=[word] * len(texts),
                                  constraints=[other] * len(texts))
    assert_rows_close(rows, [prediction(h, 4, True) for h in found])
    assert all(row["translations"].startswith(word) and other[0] in row["translations"].split() for row in rows)
    assert main(["translate", folder, *texts, "--seed", "2", "--sampling-temperature", "2",
                 "--sampling-topk", "3"]) == 0
    sampler = RandomSampler(temperature=2.0, top_k=3, seed=2)
    assert capsys.readouterr().out.splitlines() == translator.translate(texts, sampler=sampler)
    # A source and a target file (a TSV file: docs/decoding.md's command, tests/serving/test_cli_outputs.py).
    (tmp_path / "source.txt").write_text("".join(f"{s}\n" for s in texts), encoding="utf-8")
    (tmp_path / "target.txt").write_text("".join(f"{permute(s)}\n" for s in texts), encoding="utf-8")
    assert main(["score", folder, "--pairs", str(tmp_path / "source.txt"), str(tmp_path / "target.txt")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    scored = translator.score(texts, [permute(t) for t in texts])
    assert_rows_close(rows, [{"line": line, **s.prediction()} for line, s in enumerate(scored, 1)], atol=1e-4)


def absent_word(text):
    """`[word]`: the first word of the permuting model's vocabulary absent from `text`."""
    return [next(w for w in WORDS if w not in text.split())]


def post(server, body):
    request = urllib.request.Request(f"{server.url}/v1/models/permuting:predict", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_rest_instances_with_and_without_the_new_fields(exported, run_server):
    # Each field of a REST instance reaches the predictor as the `Instance`
    # that asks for it: the answers are the predictor's own for those
    # instances (which return the Translator's outputs: the test above).
    _, predict, _, held_out = exported
    server = run_server(create_app(predict, "permuting", limits=LIMITS))
    text = held_out[0]
    prefix, constraints = text.split()[0], absent_word(text)
    status, body = post(server, {"instances": [
        text, {"inputs": text, "n_best": 2, "alignments": True}, {"inputs": text, "confidences": True},
        {"inputs": text, "sampling": {"seed": 3, "temperature": 2.0, "top_p": 0.9}},
        {"inputs": text, "targets": permute(text)}, {"inputs": text, "target_prefix": prefix},
        {"inputs": text, "constraints": constraints},
    ]})
    assert status == 200
    expected = predict([text, Instance(text, n_best=2, alignments=True), Instance(text, confidences=True),
                        Instance(text, sampling=Sampling(seed=3, temperature=2.0, top_p=0.9)),
                        Instance(text, targets=permute(text)), Instance(text, target_prefix=prefix),
                        Instance(text, constraints=constraints)])
    assert_rows_close(body["predictions"], expected)
    plain, nbest, _, _, _, prefixed, constrained = body["predictions"]
    assert sorted(plain) == ["nbest_scores", "nbest_translations", "scores", "translations"]  # its 3 best
    assert len(nbest["nbest_translations"]) == 2 and "alignments" in nbest
    assert prefixed["translations"].startswith(prefix) and constraints[0] in constrained["translations"].split()
    status, body = post(server, {"inputs": {"inputs": held_out[:2], "n_best": 2}})  # columnar: for every input
    assert status == 200 and len(body["outputs"]["nbest_translations"]) == 2


@pytest.mark.parametrize("instance, words", [
    ({"inputs": "a cat", "beam": 2}, "instances[0] has an unknown field 'beam'"),
    ({"inputs": "a cat", "n_best": "2"}, "instances[0]: `n_best` must be int"),
    ({"inputs": "a cat", "n_best": 4}, "`n_best` must be at most 3"),
    ({"inputs": "a cat", "alignments": 1}, "instances[0]: `alignments` must be bool"),
    ({"inputs": "a cat", "sampling": {"top_p": 2}}, "instances[0].sampling: Argument `top_p` must be a number in (0, 1]"),
    ({"inputs": "a cat", "sampling": {"seed": "1"}}, "instances[0].sampling.seed must be a number (an integer)"),
    ({"inputs": "a cat", "sampling": {"temp": 1}}, "instances[0].sampling has an unknown field 'temp'"),
    ({"inputs": "a cat", "sampling": 3}, "instances[0].sampling must be an object"),
    ({"inputs": "a cat", "targets": "a", "n_best": 2}, "`targets` scores a given translation: it takes no other"),
    ({"inputs": 3, "n_best": 2}, "instances[0].inputs must be a string; received int"),
    ({"inputs": "a cat", "targets": "a " * 40}, "`targets` has 41 tokens with its EOS; the model scores at most 31"),
])
def test_a_bad_field_gets_a_400_naming_it(exported, run_server, instance, words):
    server = run_server(create_app(exported[1], "permuting", limits=LIMITS))
    status, body = post(server, {"instances": [instance]})
    assert status == 400 and words in body["error"]
