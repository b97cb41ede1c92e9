"""Every path returns what the `Translator` does: the SavedModel's
signatures, the command line on a SavedModel and the REST API, for n-best
lists, confidences, alignments, sampling and scores; on each, a sentence
translates alike alone and in a shuffled batch, and a request the rules
refuse is refused. The REST API serves a signature by name and its
metadata as TF Serving does, and the warm-up requests run every signature."""

import json
import os
import re
import shutil
import urllib.error
import urllib.request

import numpy as np
import pytest

from keras_transformer import RandomSampler, Translator
from keras_transformer.cli import main
from keras_transformer.decoding.common import NEG_INF
from keras_transformer.serving.predictor import Instance, Sampling, load_saved_model_predictor
from keras_transformer.serving.server import ServingLimits, create_app
from keras_transformer.translation.translator import prediction
from tests.decoding.permuting import EXPORT_MAX_EXTRA_LENGTH, N_BEST, WORDS, permute, permuting_model, sentences
from tests.helpers import assert_rows_close
from tests.serving.conftest import call_app

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
    return Translator(model, tokenizer, max_extra_length=EXPORT_MAX_EXTRA_LENGTH), predict, folder, held_out


@pytest.fixture(scope="module")
def eager(exported):
    """The same translator, decoding eagerly (`jit_compile=False`): for a
    test of a few sentences, cheaper than the graph that each of its
    decoding options (n-best, sampler, steering) would trace."""
    translator = exported[0]
    return Translator(translator.model, translator.tokenizer, max_extra_length=EXPORT_MAX_EXTRA_LENGTH,
                      jit_compile=False)


def test_the_signatures_hold_each_search_and_the_preprocessor_once(exported):
    """The five signatures call one preprocessor function (sentences and
    pieces), three searches and one forced decoding for word links, not one
    of each a signature: serving_default and details decode alike, with one
    beam search; sample and steer, each with its own; details, sample and
    steer link words alike."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(exported[2], "1", "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    names = [f.signature.name for f in saved_model.meta_graphs[0].graph_def.library.function]
    assert sum(re.fullmatch(r"__inference_pieces_\d+", name) is not None for name in names) == 1, names
    assert sum(re.fullmatch(r"__inference_search_bucket_\d+", name) is not None for name in names) == 3, names
    assert sum(re.fullmatch(r"__inference_piece_details_\d+", name) is not None for name in names) == 1, names


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


def test_the_command_line_on_a_saved_model_returns_the_translators_outputs(exported, eager, tmp_path, capsys):
    # The commands translate with the translator the folder was exported
    # from (`Translator.from_saved_model`), whatever signatures it has.
    _, predict, folder, held_out = exported
    translator = eager
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
        {"inputs": text, "constraints": constraints}, {"inputs": text, "stop": "early"},
    ]})
    assert status == 200
    expected = predict([text, Instance(text, n_best=2, alignments=True), Instance(text, confidences=True),
                        Instance(text, sampling=Sampling(seed=3, temperature=2.0, top_p=0.9)),
                        Instance(text, targets=permute(text)), Instance(text, target_prefix=prefix),
                        Instance(text, constraints=constraints), text])
    assert_rows_close(body["predictions"], expected)
    plain, nbest, _, _, _, prefixed, constrained, stopped = body["predictions"]
    assert stopped == plain  # the export's own stop rule, asked for: a plain string's answer
    assert sorted(plain) == ["nbest_scores", "nbest_translations", "scores", "translations"]  # its 3 best
    assert len(nbest["nbest_translations"]) == 2 and "alignments" in nbest
    assert prefixed["translations"].startswith(prefix) and constraints[0] in constrained["translations"].split()
    status, body = post(server, {"inputs": {"inputs": held_out[:2], "n_best": 2}})  # columnar: for every input
    assert status == 200 and len(body["outputs"]["nbest_translations"]) == 2


def test_rest_format_carries_markup_and_placeholders_as_the_translator_does(exported, eager, run_server):
    _, predict, _, held_out = exported
    translator = eager
    server = run_server(create_app(predict, "permuting", limits=LIMITS))
    words = held_out[0].split()
    page = "<p>" + " ".join(f"<b>{w}</b>" if i == 1 else w for i, w in enumerate(words)) + "</p>\n<p>" + held_out[1]
    text = f"{held_out[2]} %s {held_out[3]}"
    status, body = post(server, {"instances": [{"inputs": page, "format": "html"}, text]})
    assert status == 200
    assert [row["translations"] for row in body["predictions"]] == [
        translator.translate([page], format="html")[0], translator.translate([text])[0]]
    assert body["predictions"][0]["translations"].count("<b>") == 1
    assert body["predictions"][1]["translations"].count("%s") == 1


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
    ({"inputs": "a cat", "stop": "soon"}, "instances[0]: Argument `stop` must be one of ('exact', 'early')"),
    ({"inputs": "a cat", "stop": "exact"}, "`stop` must be 'early', the stop rule this SavedModel was exported with"),
    ({"inputs": "a cat", "targets": "a " * 40},
     "`targets` of instances[0] has 41 tokens with its EOS; the model scores at most 31"),
    ({"inputs": "a cat", "format": "xml"}, "instances[0]: Argument `format` must be one of ('text', 'html')"),
    ({"inputs": "a cat", "format": "html", "n_best": 2}, "`format` 'html' returns translations only"),
    ({"inputs": "a <b>cat</i>", "format": "html"}, "Argument `instances[0].inputs` is HTML that cannot be repaired"),
])
def test_a_bad_field_gets_a_400_naming_it(exported, run_server, instance, words):
    server = run_server(create_app(exported[1], "permuting", limits=LIMITS))
    status, body = post(server, {"instances": [instance]})
    assert status == 400 and words in body["error"]


# A long input: a first sentence of 6 source tokens with its EOS, then more
# words than the source budget holds, so that it is split and its first
# piece has less room for steering (6 + 16 tokens) than the whole (32).
LONG = "cat dog. " + " ".join(["big red fish old"] * 5)


@pytest.mark.parametrize("text, prefix, constraints, field, words", [
    (LONG, "cat " * 12, None, "target_prefix", "(prefix and constraints)"),  # 24 tokens
    ("cat dog", "cat", ["dog " * 12], "constraints", "(prefix and constraints)"),  # 2 + 24 tokens of at most 21
    ("cat dog", "Zebra", None, "target_prefix", "has a piece outside the vocabulary of the model"),
    ("cat dog", None, ["dog", "\U0001f600"], "constraints", "has a piece outside the vocabulary of the model"),
])
def test_a_request_the_rules_refuse_is_refused_on_every_path(exported, text, prefix, constraints, field, words):
    # A prefix or constraints with no room, or with a piece the vocabulary
    # lacks: the Translator, the SavedModel's `steer` signature as TF Serving
    # calls it (its graph's own checks), the REST API (an instance's fields,
    # and the signature by name) and the command line refuse it alike.
    import tensorflow as tf

    translator, predict, folder, _ = exported
    python = rf"Argument `{field}` of sentence 0 .*{re.escape(words)}"
    with pytest.raises(ValueError, match=python):
        translator.translate([text], target_prefix=None if prefix is None else [prefix],
                             constraints=None if constraints is None else [constraints])
    flag = {"target_prefix": "--target-prefix", "constraints": "--constraint"}[field]  # the command's words
    with pytest.raises(ValueError, match=rf"Argument `{flag}` of sentence 0 .*{re.escape(words)}"):
        main(["translate", folder, text, *(["--target-prefix", prefix] if prefix else []),
              *[flag for phrase in constraints or [] for flag in ("--constraint", phrase)]])
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"Argument `{field}` .*{re.escape(words)}"):
        predict.call("steer", {"inputs": [text], "target_prefix": [prefix or ""], "constraints": [constraints or [""]]})
    fields = {"inputs": text, **({} if prefix is None else {"target_prefix": prefix}),
              **({} if constraints is None else {"constraints": constraints})}
    named = {"inputs": text, "target_prefix": prefix or "", "constraints": constraints or [""]}
    answers = call_app(create_app(predict, "permuting", limits=LIMITS), [
        ("POST", "/v1/models/permuting:predict", {"json": body}) for body in (
            {"instances": ["cat dog", fields]},
            {"signature_name": "steer", "instances": [{**named, "inputs": "cat dog", "target_prefix": "",
                                                       "constraints": [""]}, named]})])
    for r in answers:
        assert r.status_code == 400
        assert re.search(rf"Argument `{field}` of instances\[1\] .*{re.escape(words)}", r.json()["error"]), r.json()


def test_a_text_to_score_over_the_models_length_is_refused_by_the_score_signature_too(exported):
    import tensorflow as tf

    translator, predict, _, _ = exported
    text = " ".join(["cat"] * 20)  # 41 tokens with its EOS; the model scores at most 32
    with pytest.raises(ValueError, match=r"Argument `sources` row 0 has 41 tokens with its EOS"):
        translator.score([text], ["dog"])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Argument `inputs` has a text over the length of the model"):
        predict.call("score", {"inputs": [text], "targets": ["dog"]})
    [r] = call_app(create_app(predict, "permuting", limits=LIMITS), [("POST", "/v1/models/permuting:predict", {
        "json": {"signature_name": "score", "instances": [{"inputs": text, "targets": "dog"}]}})])
    assert r.status_code == 400 and "Argument `inputs` of instances[0] has 41 tokens with its EOS" in r.json()["error"]


def raw_rows(predict, name, inputs):
    """The rows of signature `name`'s outputs for `inputs`, called directly."""
    columns = {key: value.numpy().tolist() for key, value in predict.call(name, inputs).items()}
    decode = lambda v: v.decode() if isinstance(v, bytes) else [decode(x) for x in v] if isinstance(v, list) else v  # noqa: E731
    return [{key: decode(column[i]) for key, column in columns.items()} for i in range(len(inputs["inputs"]))]


def test_a_request_naming_its_signature_gets_its_outputs_as_tf_serving_gives_them(exported):
    # `signature_name`: the signature's own inputs, by name, in TF Serving's
    # row or columnar form, and its outputs as they are (n-best lists with
    # the search's placeholders); the same as calling it directly.
    _, predict, _, held_out = exported
    texts = held_out[:2] + [""]
    targets = [permute(t) for t in held_out[:2]] + ["a"]
    prefixes = [t.split()[0] for t in held_out[:2]] + [""]
    phrases = [[absent_word(t)[0], ""] for t in held_out[:2]] + [["", ""]]
    cases = [
        ("serving_default", {"inputs": texts}, {"instances": texts}),
        ("details", {"inputs": texts}, {"instances": [{"inputs": t} for t in texts]}),
        ("score", {"inputs": texts, "targets": targets},
         {"instances": [{"inputs": t, "targets": u} for t, u in zip(texts, targets)]}),
        ("steer", {"inputs": texts, "target_prefix": prefixes, "constraints": phrases},
         {"instances": [{"inputs": t, "target_prefix": p, "constraints": c} for t, p, c in zip(texts, prefixes, phrases)]}),
        ("sample", {"inputs": texts, "seed": 3, "temperature": 2.0, "top_k": 0, "top_p": 1.0}, None),
    ]
    requests = []
    for name, inputs, rows in cases:
        requests.append(("POST", "/v1/models/permuting:predict", {"json": {"signature_name": name, "inputs": inputs}}))
        if rows is not None:
            requests.append(("POST", "/v1/models/permuting:predict", {"json": {"signature_name": name, **rows}}))
    requests.append(("POST", "/v1/models/permuting:predict",
                     {"json": {"signature_name": "sample", "instances": [{"inputs": "a", "seed": 1}]}}))
    answers = iter(call_app(create_app(predict, "permuting", limits=LIMITS), requests))
    for name, inputs, rows in cases:
        expected = raw_rows(predict, name, {key: np.array(value, dtype=np.float32 if key in ("temperature", "top_p")
                                                          else np.int32 if key in ("seed", "top_k") else object)
                                            for key, value in inputs.items()})
        columnar = next(answers)
        assert columnar.status_code == 200, columnar.text
        outputs = columnar.json()["outputs"]
        assert sorted(outputs) == sorted(expected[0])  # every output of the signature, by its name
        assert_rows_close([dict(zip(outputs, row)) for row in zip(*outputs.values())], expected)
        if rows is not None:
            assert_rows_close(next(answers).json()["predictions"], expected)
        if name == "details":  # its own outputs, not serving_default's, and the blank input's placeholders
            assert "alignments" in expected[0] and expected[-1]["nbest_scores"][1] <= NEG_INF / 2
    scalars = next(answers)
    assert scalars.status_code == 400 and "send them in the columnar form" in scalars.json()["error"]


def test_the_metadata_api_returns_the_saved_models_signature_defs(exported):
    # TF Serving's GetModelMetadataResponse: each signature's inputs and
    # outputs by name, with their dtypes and shapes, as TensorFlow loads them.
    from tensorflow.core.framework import types_pb2

    _, predict, _, _ = exported
    answers = call_app(create_app(predict, "permuting", limits=LIMITS), [
        ("GET", "/v1/models/permuting/metadata", {}), ("GET", "/v1/models/permuting/versions/1/metadata", {})])
    assert [r.status_code for r in answers] == [200, 200] and answers[0].json() == answers[1].json()
    body = answers[0].json()
    assert body["model_spec"] == {"name": "permuting", "signature_name": "", "version": "1"}
    defs = body["metadata"]["signature_def"]["signature_def"]
    assert set(predict.signatures) <= set(defs)

    def described(tensors):
        return {name: (t["dtype"], [int(d["size"]) for d in t["tensor_shape"]["dim"]]) for name, t in tensors.items()}

    def loaded(specs):
        return {name: (types_pb2.DataType.Name(spec.dtype.as_datatype_enum), [-1 if d is None else d for d in spec.shape])
                for name, spec in specs.items()}

    for name in predict.signatures:
        signature = predict.saved_model.signatures[name]
        assert described(defs[name]["inputs"]) == loaded(signature.structured_input_signature[1])
        assert described(defs[name]["outputs"]) == loaded(signature.structured_outputs)
        assert defs[name]["method_name"] == "tensorflow/serving/predict"


def test_confidences_false_leaves_them_out_and_a_blank_input_has_one_hypothesis(exported):
    # As `Translator.hypotheses` gives it: a blank input's n-best list holds
    # its one empty translation, through `serving_default` (a plain string)
    # as through `details`; the graph marks the other ranks as placeholders.
    translator, predict, _, held_out = exported
    text = held_out[0]
    [r] = call_app(create_app(predict, "permuting", limits=LIMITS, blank_output=predict([""])[0]), [
        ("POST", "/v1/models/permuting:predict", {"json": {"instances": [
            text, {"inputs": text, "confidences": False}, {"inputs": text, "n_best": 2, "confidences": False},
            {"inputs": text, "n_best": 2}, "", {"inputs": "", "n_best": N_BEST}, {"inputs": "", "confidences": False}]}})])
    plain, without, nbest_without, nbest, blank, blank_details, blank_without = r.json()["predictions"]
    assert without == plain and sorted(plain) == ["nbest_scores", "nbest_translations", "scores", "translations"]
    assert nbest_without == {key: value for key, value in nbest.items() if "confidences" not in key}
    assert "confidences" in nbest and "nbest_confidences" in nbest
    expected = prediction(translator.hypotheses([""], N_BEST)[0], N_BEST)
    assert expected["nbest_translations"] == [""] and blank_details == expected
    assert blank == blank_without == {key: value for key, value in expected.items() if "confidences" not in key}
    [raw] = raw_rows(predict, "serving_default", {"inputs": np.array([""], dtype=object)})
    assert raw["nbest_translations"] == [""] * N_BEST and all(s <= NEG_INF / 2 for s in raw["nbest_scores"][1:])


def test_the_warmup_requests_run_every_signature_in_every_bucket(exported, tmp_path):
    # One request per signature, bucket and batch size, each holding the
    # signature's own inputs (TF Serving's PredictRequest), which the
    # SavedModel's signatures run as TF Serving runs them at load.
    from keras_transformer.export.warmup import read_warmup_requests, replay_warmup_requests, write_warmup_requests

    _, predict, folder, _ = exported
    copy = str(tmp_path / "1")
    shutil.copytree(os.path.join(folder, "1"), copy)
    write_warmup_requests(copy, batch_sizes=(1,))  # several: tests/export/test_export.py
    requests = read_warmup_requests(copy)
    buckets = json.load(open(os.path.join(copy, "assets.extra", "metadata.json")))["buckets"]
    signatures = ["serving_default", "details", "sample", "score", "steer"]
    assert [(name, len(inputs["inputs"])) for name, inputs in requests] == [
        (name, 1) for name in signatures for _ in buckets]
    for name, inputs in requests:
        specs = predict.saved_model.signatures[name].structured_input_signature[1]
        assert {key: (value.dtype.kind, value.ndim) for key, value in inputs.items()} == {
            key: ("O" if spec.dtype.name == "string" else np.dtype(spec.dtype.name).kind, spec.shape.rank)
            for key, spec in specs.items()}
    ran = []
    assert replay_warmup_requests(lambda name, inputs: ran.append((name, predict.call(name, inputs))), copy)[0] == len(
        requests)
    word = requests[-1][1]["target_prefix"][0].decode()
    steered = [out for name, out in ran if name == "steer"]
    assert word and all(t.decode().startswith(word) for out in steered for t in out["translations"].numpy())
