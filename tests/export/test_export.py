"""The exported SavedModel: strings in, translations out, without this package."""

import io
import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

pytestmark = [
    pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="SavedModel export runs in the TensorFlow pass"),
    pytest.mark.slow,  # XLA-compiled beam search, exported in two buckets (8 and the source budget, 32); fresh processes
]

SENTENCES = [
    "Hello there.", "How are you?", "I am fine, thank you.", "Where is the station?",
    "It costs 12 euros.", "Good morning to all!", "See you tomorrow.", "The cat sleeps.",
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import sentencepiece as spm

    from keras_transformer import LabelSmoothedCrossEntropy, Transformer, paper_optimizer
    from keras_transformer.export import export

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SENTENCES * 10), model_writer=buffer, vocab_size=90,
        model_type="bpe", pad_id=0, unk_id=1, bos_id=2, eos_id=3, character_coverage=1.0,
    )
    sp = spm.SentencePieceProcessor(model_proto=buffer.getvalue())
    # A few steps of learning to copy, so that the best beams are far apart.
    ids = [sp.encode(s) for s in SENTENCES]
    length = max(map(len, ids)) + 2
    source = np.array([x + [3] + [0] * (length - len(x) - 1) for x in ids], "int32")
    target = np.array([[2] + x + [3] + [0] * (length - len(x) - 1) for x in ids], "int32")
    keras.utils.set_random_seed(0)
    model = Transformer(vocab_size=90, num_layers=1, d_model=32, num_heads=2, d_ff=64, max_length=64, dropout_rate=0.0)
    model.compile(paper_optimizer(32, warmup_steps=20), LabelSmoothedCrossEntropy())
    model.fit((source, target[:, :-1]), target[:, 1:], epochs=60, batch_size=8, verbose=0)
    path = export(model, buffer.getvalue(), str(tmp_path_factory.mktemp("saved") / "copy"), n_best=2, buckets=(8,))
    return model, sp, path


def in_memory_translations(model, sp, sentences):
    """The same decoding with the Python tokenizer and eager beam search."""
    from keras_transformer.decoding import beam_search

    ids = [sp.encode(s) + [3] for s in sentences]
    width = max(map(len, ids))
    source = np.array([x + [0] * (width - len(x)) for x in ids], "int32")
    tokens, scores = beam_search(model, source, beam_size=4, alpha=0.6, max_extra_length=50)
    tokens = keras.ops.convert_to_numpy(tokens)
    texts = [sp.decode([int(t) for t in row[: list(row).index(3)] if t] if 3 in row else [int(t) for t in row if t]) for row in tokens]
    return texts, keras.ops.convert_to_numpy(scores)


# Runs in a fresh interpreter without this package or Keras: `-I` (isolated:
# PYTHONPATH ignored, no current directory on sys.path), from an empty
# directory, with `keras` and `keras_transformer` set to None in sys.modules:
# every import of them fails and `importlib.util.find_spec` reports them
# missing, as when they are not installed (the editable install's finder
# would otherwise still find this package). `import tensorflow_text` imports
# tf.keras (for its Keras layers), so the tensorflow-text kernels, all that
# the SavedModel needs, are loaded from their libraries instead.
RELOAD = r"""
import sys
BLOCKED = ("keras", "keras_transformer")
for name in BLOCKED:
    sys.modules[name] = None
import glob, importlib.util, json, os
import tensorflow as tf
for name in BLOCKED:
    try:
        __import__(name)
    except ImportError:
        pass
    else:
        raise AssertionError(f"{name} is importable")
assert not [p for p in sys.path if os.path.exists(os.path.join(p or ".", "keras_transformer"))], sys.path
ops = os.path.join(importlib.util.find_spec("tensorflow_text").submodule_search_locations[0], "python", "ops")
for library in sorted(glob.glob(os.path.join(ops, "_*.so"))):
    tf.load_op_library(library)
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](inputs=tf.constant(json.loads(sys.argv[2])))
loaded_modules = [m for m in sys.modules if m.partition(".")[0] in BLOCKED and sys.modules[m] is not None]
assert not loaded_modules and "tensorflow_text" not in sys.modules, loaded_modules
print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}, default=lambda b: b.decode("utf-8")))
"""


def test_version_folder_layout_and_assets(exported):
    _, _, path = exported
    assert os.path.basename(path) == "1"
    assert os.path.isfile(os.path.join(path, "saved_model.pb"))
    assert os.path.isfile(os.path.join(path, "assets", "tokenizer.model"))
    metadata = json.load(open(os.path.join(path, "assets.extra", "metadata.json")))
    assert metadata["beam_size"] == 4 and metadata["alpha"] == 0.6 and metadata["max_extra_length"] == 50
    assert metadata["jit_compile"] is False
    assert not [d for d in os.listdir(os.path.dirname(path)) if d.startswith(".export-")]


def test_reloaded_it_translates_like_the_in_memory_model_with_its_n_best(exported, tmp_path):
    # Here, and in a fresh process with only tensorflow and tensorflow-text's
    # ops (the XLA test below: XLA's SavedModel).
    import tensorflow as tf

    model, sp, path = exported
    sentences = ["Hello there.", "The cat sleeps.", "It costs 12 euros.", "Good morning to all!"]
    expected, scores = in_memory_translations(model, sp, sentences)
    assert expected[:2] == sentences[:2]  # the toy model really learned to copy
    out = tf.saved_model.load(path).signatures["serving_default"](inputs=tf.constant(sentences))
    assert [t.decode() for t in out["translations"].numpy()] == expected
    np.testing.assert_allclose(out["scores"].numpy(), scores, rtol=1e-4)
    assert out["nbest_translations"].shape == (4, 2)
    assert [row[0].decode() for row in out["nbest_translations"].numpy()] == expected
    assert all(a >= b for a, b in out["nbest_scores"].numpy())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-I", "-c", RELOAD, os.path.abspath(path), json.dumps(sentences)],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1])["translations"] == expected


def test_from_saved_model_is_the_translator_it_was_traced_from(exported, tmp_path):
    """`Translator.from_saved_model` (what `translate`, `evaluate` and
    `score` run on a SavedModel folder): the exported weights, tokenizer and
    decoding settings, the graph's translations without loading it."""
    import tensorflow as tf

    from keras_transformer import SubwordTokenizer, Translator

    model, sp, _ = exported
    translator = Translator(model, SubwordTokenizer(sp.serialized_model_proto()), beam_size=2, alpha=1.0,
                            long_inputs="truncate", buckets=(8,))
    path = translator.export(str(tmp_path / "copy"), parallel_loops=1, warmup_batch_sizes=())
    loaded = Translator.from_saved_model(str(tmp_path / "copy"), batch_size=3)
    assert (loaded.beam_size, loaded.alpha, loaded.preprocessor.long_inputs, loaded.preprocessor.buckets,
            loaded.batch_size) == (2, 1.0, "truncate", translator.preprocessor.buckets, 3)
    graph = tf.saved_model.load(path).signatures["serving_default"](inputs=tf.constant(SENTENCES))
    expected = translator.translate(SENTENCES)
    assert expected[:2] == SENTENCES[:2]  # the copying model
    assert loaded.translate(SENTENCES) == [t.decode() for t in graph["translations"].numpy()] == expected
    with pytest.raises(ValueError, match=r"decodes as it was exported: beam_size cannot change\. Received: beam_size=4"):
        Translator.from_saved_model(path, beam_size=4)
    metadata = os.path.join(path, "assets.extra", "metadata.json")
    with open(metadata) as f:
        settings = json.load(f)
    with open(metadata, "w") as f:
        json.dump({k: v for k, v in settings.items() if k != "weights"}, f)
    with pytest.raises(ValueError, match=r"no model config and weight names.*Re-export it"):
        Translator.from_saved_model(path)


def test_empty_and_over_long_inputs_never_fail_the_batch(exported):
    import tensorflow as tf

    _, _, path = exported
    translate = tf.saved_model.load(path).signatures["serving_default"]
    long_input = "Hello there. " * 200  # far over the source budget: 200 sentences, each translated
    out = translate(inputs=tf.constant(["", "   ", long_input, "Hello there."]))
    texts = [t.decode() for t in out["translations"].numpy()]
    assert texts[:2] == ["", ""] and out["scores"].numpy()[:2].tolist() == [0.0, 0.0]
    assert texts[2:] == [long_input.strip(), "Hello there."]
    np.testing.assert_allclose(out["scores"].numpy()[2], out["scores"].numpy()[3], rtol=1e-5)  # their mean
    empty = translate(inputs=tf.constant([], dtype=tf.string))
    assert empty["translations"].shape == (0,)


def test_each_sentence_is_decoded_in_its_own_bucket_whatever_the_batch_holds(exported):
    import tensorflow as tf

    _, _, path = exported
    translate = tf.saved_model.load(path).signatures["serving_default"]
    long_input = " ".join(SENTENCES[:4])  # over the 8-token bucket: decoded in the 16 (or longest) one
    batch = [SENTENCES[0], long_input, "", SENTENCES[7], SENTENCES[3]]
    together = translate(inputs=tf.constant(batch))
    for i, sentence in enumerate(batch):
        alone = translate(inputs=tf.constant([sentence]))
        assert together["translations"].numpy()[i] == alone["translations"].numpy()[0], sentence
        np.testing.assert_allclose(together["scores"].numpy()[i], alone["scores"].numpy()[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(together["nbest_translations"].numpy()[i], alone["nbest_translations"].numpy()[0])


def test_a_damaged_saved_model_is_an_os_error_naming_it(exported, tmp_path):
    import shutil

    from keras_transformer.cli import main
    from keras_transformer.serving import load_saved_model_predictor

    _, _, path = exported
    damaged = str(tmp_path / "damaged" / "1")
    shutil.copytree(path, damaged)
    data = os.path.join(damaged, "variables", "variables.data-00000-of-00001")
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    with pytest.raises(OSError, match=re.escape(f"Cannot load the SavedModel at {damaged!r}")):
        load_saved_model_predictor(damaged)
    with pytest.raises(OSError, match="Cannot load"):
        main(["translate", os.path.dirname(damaged), "Hi."])


def parse_warmup_file(path):
    """Each record of assets.extra/tf_serving_warmup_requests, read with TF Serving's own protos."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    records = tf.data.TFRecordDataset(os.path.join(path, "assets.extra", "tf_serving_warmup_requests"))
    return [prediction_log_pb2.PredictionLog.FromString(r) for r in records.as_numpy_iterator()]


def test_warmup_requests_fill_each_bucket_and_translate(exported):
    """TF Serving replays assets.extra/tf_serving_warmup_requests at load: by default one
    predict request of one sentence per bucket, the sentence landing in that bucket."""
    import tensorflow as tf

    from keras_transformer.serving.warmup import read_warmup_requests

    model, sp, path = exported
    buckets = json.load(open(os.path.join(path, "assets.extra", "metadata.json")))["buckets"]
    logs = parse_warmup_file(path)
    assert len(logs) == len(buckets) == 2
    sentences = []
    for log in logs:
        request = log.predict_log.request
        assert request.model_spec.signature_name == "serving_default" and list(request.inputs) == ["inputs"]
        tensor = tf.make_ndarray(request.inputs["inputs"])
        assert tensor.shape == (1,)
        sentences.append(tensor[0].decode("utf-8"))
    assert read_warmup_requests(path) == [[s] for s in sentences]
    # A source of n pieces takes n + 1 tokens with EOS: each sentence fills its bucket.
    lengths = [len(sp.encode(s)) + 1 for s in sentences]
    assert lengths[0] == buckets[0] and buckets[0] < lengths[1] <= buckets[1], (lengths, buckets)
    # They are requests the SavedModel answers as the model does.
    signature = tf.saved_model.load(path).signatures["serving_default"]
    out = signature(inputs=tf.constant(sentences))["translations"].numpy()
    assert [t.decode("utf-8") for t in out] == in_memory_translations(model, sp, sentences)[0]


def test_warmup_requests_for_an_older_export_and_a_damaged_file(exported, tmp_path):
    """`write_warmup_requests` gives any of our SavedModels the file (one request per bucket
    and batch size); a damaged file is an OSError naming it, as TF Serving would refuse it."""
    import shutil

    from keras_transformer.serving.warmup import read_warmup_requests, replay_warmup_requests, write_warmup_requests

    _, _, path = exported
    copy = str(tmp_path / "1")
    shutil.copytree(path, copy)
    os.remove(os.path.join(copy, "assets.extra", "tf_serving_warmup_requests"))
    assert read_warmup_requests(copy) == []
    write_warmup_requests(copy, batch_sizes=(1, 3))
    requests = read_warmup_requests(copy)
    assert [len(r) for r in requests] == [1, 3, 1, 3] and requests[1] == [requests[0][0]] * 3
    seen = []
    assert replay_warmup_requests(seen.append, copy)[0] == 4 and seen == requests
    for bad in ((0,), (1.5,), 4, (True,), (1,) * 501):
        with pytest.raises(ValueError, match="batch_sizes"):
            write_warmup_requests(copy, batch_sizes=bad)
    with open(os.path.join(copy, "assets.extra", "tf_serving_warmup_requests"), "wb") as f:
        f.write(b"not a TFRecord file")
    with pytest.raises(OSError, match="tf_serving_warmup_requests"):
        read_warmup_requests(copy)
    with pytest.raises(FileNotFoundError, match="metadata.json"):
        write_warmup_requests(str(tmp_path))


def test_saved_model_cli_lists_the_signature(exported):
    _, _, path = exported
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    run = subprocess.run([cli, "show", "--dir", path, "--all"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    for words in ("signature_def['serving_default']", "inputs['inputs']", "outputs['translations']", "outputs['scores']", "DT_STRING"):
        assert words in run.stdout


def test_every_weight_is_stored_once(exported):
    model, _, path = exported
    size = os.path.getsize(os.path.join(path, "variables", "variables.data-00000-of-00001"))
    assert 4 * model.count_params() <= size < 1.1 * 4 * model.count_params()


def test_an_int8_quantized_model_exports_and_translates_as_in_memory(exported, tmp_path):
    # `export --quantize int8`: int8 kernels in the SavedModel's variables,
    # the translations and scores of the model quantized in memory.
    import tensorflow as tf

    from keras_transformer import Transformer, Translator
    from keras_transformer.cli import main

    model, sp, _ = exported
    model_file, tokenizer_file = str(tmp_path / "model.keras"), str(tmp_path / "tokenizer.model")
    model.save(model_file)
    with open(tokenizer_file, "wb") as f:
        f.write(sp.serialized_model_proto())
    assert main(["export", model_file, "--tokenizer", tokenizer_file, "--output-dir", str(tmp_path / "int8"),
                 "--buckets", "16", "--quantize", "int8", "--parallel-loops", "1", "--no-warmup"]) == 0
    path = str(tmp_path / "int8" / "1")
    assert json.load(open(os.path.join(path, "assets.extra", "metadata.json")))["quantize"] == "int8"
    quantized = Transformer.from_config(model.get_config())
    quantized.build(((None, None), (None, None)))
    quantized.set_weights(model.get_weights())
    quantized.quantize("int8")
    expected, scores = in_memory_translations(quantized, sp, SENTENCES)
    assert expected[:2] == SENTENCES[:2]  # still the copying model
    out = tf.saved_model.load(path).signatures["serving_default"](inputs=tf.constant(SENTENCES))
    assert [t.decode() for t in out["translations"].numpy()] == expected
    np.testing.assert_allclose(out["scores"].numpy(), scores, rtol=1e-4)
    assert Translator.from_saved_model(path).translate(SENTENCES) == expected  # its int8 layers rebuilt
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    dtypes = reader.get_variable_to_dtype_map()
    # One int8 tensor (kernel, or embedding table) per quantized layer.
    assert sum(dtype == tf.int8 for dtype in dtypes.values()) == sum(
        layer.quantization_mode == "int8" for layer in quantized._flatten_layers()
    ) > 0


@pytest.mark.parametrize("narrow_batches", [False, True])
def test_an_xla_compiled_saved_model_translates_as_the_plain_one(exported, tmp_path, narrow_batches):
    # `jit_compile=True`: each bucket's beam search compiled per number of
    # rows, rounded up to a power of two (3 rows run as 4, with a copy of
    # the last sentence), the same outputs as the graph without XLA. With
    # `narrow_batches` (`beam_search(drop_finished="halves")`, the batch
    # size known only when the graph runs): 32 sentences of the first
    # bucket, 28 of 5 tokens and 4 of 7, go on as a quarter of the batch (8
    # rows) once the short ones are done; one sentence alone never narrows.
    import tensorflow as tf

    from keras_transformer.export import export

    model, sp, path = exported
    compiled = export(model, sp.serialized_model_proto(), str(tmp_path / "xla"), n_best=2, buckets=(8,),
                      jit_compile=True, narrow_batches=narrow_batches, warmup_batch_sizes=())
    metadata = json.load(open(os.path.join(compiled, "assets.extra", "metadata.json")))
    assert metadata["jit_compile"] is True and metadata["narrow_batches"] is narrow_batches
    assert not os.path.exists(os.path.join(compiled, "assets.extra", "tf_serving_warmup_requests"))  # none asked
    plain = tf.saved_model.load(path).signatures["serving_default"]
    xla = tf.saved_model.load(compiled).signatures["serving_default"]
    batches = [SENTENCES[:3], SENTENCES + ["", "Hello there."]]
    if narrow_batches:
        batches = [SENTENCES[:1], ["Hello there.", "How are you?"] * 14 + ["See you tomorrow."] * 4]
    for batch in batches:
        expected, out = plain(inputs=tf.constant(batch)), xla(inputs=tf.constant(batch))
        assert out["nbest_translations"].numpy().tolist() == expected["nbest_translations"].numpy().tolist()
        np.testing.assert_allclose(out["nbest_scores"].numpy(), expected["nbest_scores"].numpy(), rtol=1e-4)
    if narrow_batches:  # XLA's SavedModel too runs with tensorflow and tensorflow-text alone
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        run = subprocess.run(
            [sys.executable, "-I", "-c", RELOAD, os.path.abspath(compiled), json.dumps(batches[-1])],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        fresh = json.loads(run.stdout.strip().splitlines()[-1])["nbest_translations"]
        assert fresh == [[t.decode() for t in row] for row in expected["nbest_translations"].numpy()]


def test_parallel_loops_translate_as_one(exported, tmp_path):
    """A bucket's sentences split into parts, each decoded by its own loop: the same n-best
    and scores as the fixture's two loops, with parts that are empty, uneven or
    stop at different lengths (the shorter parts' ids padded)."""
    import tensorflow as tf

    from keras_transformer.export import export

    model, sp, path = exported
    assert json.load(open(os.path.join(path, "assets.extra", "metadata.json")))["parallel_loops"] == 2  # the default
    three = export(model, sp.serialized_model_proto(), str(tmp_path / "three"), n_best=2, buckets=(8,),
                   parallel_loops=3, warmup_batch_sizes=())
    assert json.load(open(os.path.join(three, "assets.extra", "metadata.json")))["parallel_loops"] == 3
    assert json.load(open(os.path.join(three, "assets.extra", "metadata.json")))["signatures"] == ["serving_default"]
    two, three = (tf.saved_model.load(p).signatures["serving_default"] for p in (path, three))
    for batch in (SENTENCES[:1], SENTENCES[:2], SENTENCES[:5], SENTENCES + ["", "Hello there."]):
        expected, out = two(inputs=tf.constant(batch)), three(inputs=tf.constant(batch))
        assert out["nbest_translations"].numpy().tolist() == expected["nbest_translations"].numpy().tolist()
        np.testing.assert_allclose(out["nbest_scores"].numpy(), expected["nbest_scores"].numpy(), rtol=1e-5)
    # And as the model itself decodes them, one batch in memory.
    texts = [t.decode("utf-8") for t in three(inputs=tf.constant(SENTENCES))["translations"].numpy()]
    assert texts == in_memory_translations(model, sp, SENTENCES)[0]


def test_bad_export_arguments(exported, tmp_path):
    from keras_transformer.export import export

    model, _, path = exported
    tokenizer = open(os.path.join(path, "assets", "tokenizer.model"), "rb").read()
    with pytest.raises(ValueError, match="beam_size"):
        export(model, tokenizer, str(tmp_path), beam_size=0)
    with pytest.raises(ValueError, match="buckets"):
        export(model, tokenizer, str(tmp_path), buckets=(0, 16))
    for name, value in (("version", -1), ("version", 0), ("version", "abc"), ("long_inputs", "cut"), ("buckets", 8),
                        ("jit_compile", "yes"), ("warmup_batch_sizes", 1), ("warmup_batch_sizes", (0,)),
                        ("parallel_loops", 0), ("narrow_batches", "yes"), ("narrow_batches", True)):
        with pytest.raises(ValueError, match=f"`{name}`.*Received: " + re.escape(f"{name}={value!r}")):
            export(model, tokenizer, str(tmp_path), **{name: value})
    with pytest.raises(ValueError, match="`parallel_loops` applies to the graph without XLA"):
        export(model, tokenizer, str(tmp_path), jit_compile=True, parallel_loops=2)
    assert os.listdir(tmp_path) == []
    with pytest.raises(FileNotFoundError, match="no_such.model"):
        export(model, str(tmp_path / "no_such.model"), str(tmp_path))
    with pytest.raises(FileExistsError):
        export(model, os.path.join(path, "assets", "tokenizer.model"), os.path.dirname(path), version=1)


def test_command_line_export_translate_and_plot(exported, tmp_path, capsys):
    from keras_transformer.cli import main

    model, sp, _ = exported
    model_file, tokenizer_file = str(tmp_path / "model.keras"), str(tmp_path / "tokenizer.model")
    model.save(model_file)
    with open(tokenizer_file, "wb") as f:
        f.write(sp.serialized_model_proto())
    export = ["export", model_file, "--tokenizer", tokenizer_file, "--output-dir", str(tmp_path / "saved" / "copy")]
    with pytest.raises(SystemExit, match="--metadata"):
        main(export + ["--metadata", "[1, 2]"])
    assert main(export + ["--buckets", "8", "--metadata", '{"bleu": 1.5}', "--warmup-batch-sizes", "1", "4",
                          "--parallel-loops", "1"]) == 0
    assert os.path.isfile(tmp_path / "saved" / "copy" / "1" / "saved_model.pb")
    warmup = parse_warmup_file(str(tmp_path / "saved" / "copy" / "1"))  # 2 buckets x 2 batch sizes
    assert [r.predict_log.request.inputs["inputs"].tensor_shape.dim[0].size for r in warmup] == [1, 4, 1, 4]
    metadata = json.load(open(tmp_path / "saved" / "copy" / "1" / "assets.extra" / "metadata.json"))
    assert metadata["bleu"] == 1.5 and metadata["buckets"] == [8, metadata["source_budget"]]
    assert metadata["parallel_loops"] == 1

    sentences = ["Hello there.", "The cat sleeps."]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    assert main(["translate", str(tmp_path / "saved" / "copy"), "--input", str(tmp_path / "in.txt"), "--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == in_memory_translations(model, sp, sentences)[0]

    plot = tmp_path / "attention.png"
    capsys.readouterr()
    assert main(["translate", model_file, "Hello there.", "--tokenizer", tokenizer_file, "--plot-attention", str(plot)]) == 0
    assert capsys.readouterr().out.strip() == in_memory_translations(model, sp, ["Hello there."])[0][0]
    assert plot.read_bytes()[:4] == b"\x89PNG"

    tsv = tmp_path / "test.tsv"
    tsv.write_text("Hello there.\tHello there.\nThe cat sleeps.\tThe cat sleeps.\nThe cat sleeps.\tA cat sleeps.\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "saved" / "copy"), "--tsv", str(tsv)]) == 0
    out = capsys.readouterr().out
    assert "BLEU = 100.00" in out and "nrefs:2" in out and "chrF2 = 100.00" in out


@pytest.mark.parametrize("name", ["train", "average-checkpoints", "export", "translate", "evaluate", "serve"])
def test_every_command_explains_itself(name, capsys):
    from keras_transformer.cli import main

    with pytest.raises(SystemExit) as exit:
        main([name, "--help"])
    assert exit.value.code == 0
    assert len(capsys.readouterr().out) > 200
