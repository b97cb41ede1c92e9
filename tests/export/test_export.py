"""The exported SavedModel: strings in, translations out, without this package.

Two exports: the copying model's, with the defaults but two buckets and its
2 best (tests/export/copying.py, shared with the modules that serve it),
whose translations come from one fresh process with only TensorFlow; and
one by `keras-transformer export` with every option it can set at once
(int8, one loop, a beam of 2, truncation, a version, warm-up batch sizes,
metadata), loaded once here. XLA's SavedModels: tests/export/test_xla_export.py."""

import json
import os
import re
import shutil

import keras
import numpy as np
import pytest

from tests.export.copying import (SENTENCES, in_memory_translations, load_copying_export,
                                  serve_batches_in_a_fresh_process)

pytestmark = [
    pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="SavedModel export runs in the TensorFlow pass"),
    pytest.mark.slow,  # beam search traced and exported, in two buckets; fresh processes
]


@pytest.fixture(scope="module")
def exported():
    """`(model, SentencePiece processor, version folder)`: the copying
    model's SavedModel (tests/shared.py), beside an empty older version 9."""
    return load_copying_export()


# The batches `translated` sends: 4 sentences; blank and over-long inputs,
# and none; and a batch across both buckets, then each of its sentences alone.
LONG_INPUT = "Hello there. " * 200  # far over the source budget: 200 sentences, each translated
ACROSS_BUCKETS = [SENTENCES[0], " ".join(SENTENCES[:4]), "", SENTENCES[7], SENTENCES[3]]  # the 2nd over 8 tokens
BATCHES = [["Hello there.", "The cat sleeps.", "It costs 12 euros.", "Good morning to all!"],
           ["", "   ", LONG_INPUT, "Hello there."], [], ACROSS_BUCKETS, *[[s] for s in ACROSS_BUCKETS]]


@pytest.fixture(scope="module")
def translated(exported, tmp_path_factory):
    """`{tuple(batch): outputs}`: serving_default's outputs for each batch
    of `BATCHES`, in one fresh process with only TensorFlow, without its
    graph rewrites, as this process runs graphs (tests/conftest.py);
    `keras-transformer serve` runs this SavedModel with them
    (tests/serving/test_serve_command.py)."""
    outputs = serve_batches_in_a_fresh_process(exported[2], BATCHES, tmp_path_factory.mktemp("fresh"),
                                               graph_rewrites=False)
    return {tuple(batch): out for batch, out in zip(BATCHES, outputs)}


@pytest.fixture(scope="module")
def translate(exported):
    """Its `serving_default`, loaded once for this module, for its signature
    and its weights (its translations: `translated`)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the tokenizer's ops

    loaded = tf.saved_model.load(exported[2])
    signature = loaded.signatures["serving_default"]
    signature.loaded = loaded  # the variables live as long as the loaded object
    return signature


def test_version_folder_layout_and_assets(exported):
    _, _, path = exported
    assert os.path.basename(path) == "10"  # the next version after 9 (their order: tests/serving/test_server.py)
    assert os.path.isfile(os.path.join(path, "saved_model.pb"))
    assert os.path.isfile(os.path.join(path, "assets", "tokenizer.model"))
    metadata = json.load(open(os.path.join(path, "assets.extra", "metadata.json")))
    assert metadata["beam_size"] == 4 and metadata["alpha"] == 0.6 and metadata["max_extra_length"] == 50
    assert metadata["jit_compile"] is False and metadata["parallel_loops"] == 2
    assert metadata["signatures"] == ["serving_default"]
    assert not [d for d in os.listdir(os.path.dirname(path)) if d.startswith(".export-")]


def test_reloaded_in_a_fresh_process_with_only_tensorflow_it_translates_as_in_memory_with_its_n_best(
        exported, translated):
    # Its 2 best and their scores are beam search's over the model in
    # memory, with the export's settings (the defaults). So are those of the
    # command line's export below (every option of its graph), and those of
    # tests/serving/test_output_paths.py's (every signature, its 3 best).
    model, sp, _ = exported
    sentences = BATCHES[0]
    out = translated[tuple(sentences)]
    assert out["translations"][:2] == sentences[:2]  # the toy model really learned to copy
    nbest, scores = in_memory_translations(model, sp, sentences, stop="early", num_return=2)
    assert out["nbest_translations"] == nbest and np.shape(nbest) == (4, 2)
    np.testing.assert_allclose(out["nbest_scores"], scores, rtol=1e-5)
    assert out["translations"] == [row[0] for row in nbest]
    np.testing.assert_allclose(np.array(out["nbest_scores"])[:, 0], out["scores"], rtol=1e-6)
    assert all(a >= b for a, b in out["nbest_scores"])


def test_the_signature_takes_strings_and_names_its_outputs(translate):
    # What TF Serving and saved_model_cli read: one string input, named outputs.
    import tensorflow as tf

    (_, inputs) = translate.structured_input_signature
    assert list(inputs) == ["inputs"] and inputs["inputs"].dtype == tf.string and inputs["inputs"].shape.rank == 1
    assert sorted(translate.structured_outputs) == ["nbest_scores", "nbest_translations", "scores", "translations"]


def test_empty_and_over_long_inputs_never_fail_the_batch(translated):
    out = translated[tuple(BATCHES[1])]
    texts = out["translations"]
    assert texts[:2] == ["", ""] and out["scores"][:2] == [0.0, 0.0]
    assert texts[2:] == [LONG_INPUT, "Hello there."]  # its sentences each translated, its spaces kept
    np.testing.assert_allclose(out["scores"][2], out["scores"][3], rtol=1e-5)  # their mean
    assert translated[()]["translations"] == []


def test_each_sentence_is_decoded_in_its_own_bucket_whatever_the_batch_holds(translated):
    # Its two loops (the default) each take a part of a bucket's sentences:
    # alone, one part is empty; together, the parts are uneven.
    together = translated[tuple(ACROSS_BUCKETS)]
    for i, sentence in enumerate(ACROSS_BUCKETS):
        alone = translated[(sentence,)]
        assert together["translations"][i] == alone["translations"][0], sentence
        np.testing.assert_allclose(together["scores"][i], alone["scores"][0], rtol=1e-5, atol=1e-6)
        assert together["nbest_translations"][i] == alone["nbest_translations"][0]


def test_a_damaged_saved_model_is_an_os_error_naming_it(exported, tmp_path):
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


def test_the_command_line_translates_and_evaluates_a_saved_model_folder(exported, tmp_path, capsys):
    # The copying model's folder: its latest version, 10, beside an empty 9.
    import sacrebleu

    from keras_transformer.cli import main

    model, sp, path = exported
    folder = os.path.dirname(path)
    sentences = ["Hello there.", "The cat sleeps."]
    expected = in_memory_translations(model, sp, sentences, stop="early")[0]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    capsys.readouterr()
    assert main(["translate", folder, "--input", str(tmp_path / "in.txt"), "--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8").splitlines() == expected
    printed = capsys.readouterr()
    assert printed.out == "" and "2/2" in printed.err  # the progress bar, on standard error
    tsv = tmp_path / "test.tsv"
    tsv.write_text("Hello there.\tHello there.\nThe cat sleeps.\tThe cat sleeps.\nThe cat sleeps.\tA cat sleeps.\n",
                   encoding="utf-8")
    capsys.readouterr()
    assert main(["evaluate", folder, "--tsv", str(tsv)]) == 0
    printed, progress = capsys.readouterr()
    assert "2/2" in progress and "2/2" not in printed  # the same progress bar
    bleu = sacrebleu.corpus_bleu(expected, [["Hello there.", "The cat sleeps."], [None, "A cat sleeps."]])
    assert f"BLEU = {bleu.score:.2f} " in printed and "nrefs:2" in printed


def parse_warmup_file(path):
    """Each record of assets.extra/tf_serving_warmup_requests, read with TF Serving's own protos."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    records = tf.data.TFRecordDataset(os.path.join(path, "assets.extra", "tf_serving_warmup_requests"))
    return [prediction_log_pb2.PredictionLog.FromString(r) for r in records.as_numpy_iterator()]


def test_warmup_requests_fill_each_bucket(exported):
    """TF Serving replays assets.extra/tf_serving_warmup_requests at load: by default one
    predict request of one sentence per bucket, the sentence landing in that bucket.
    (serve replays them: tests/serving/test_serve_command.py.)"""
    import tensorflow as tf

    from keras_transformer.export.warmup import read_warmup_requests

    _, sp, path = exported
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
    assert [(name, inputs["inputs"].tolist()) for name, inputs in read_warmup_requests(path)] == [
        ("serving_default", [s.encode()]) for s in sentences]
    # A source of n pieces takes n + 1 tokens with EOS: each sentence fills its bucket.
    lengths = [len(sp.encode(s)) + 1 for s in sentences]
    assert lengths[0] == buckets[0] and buckets[0] < lengths[1] <= buckets[1], (lengths, buckets)


def test_warmup_requests_for_an_older_export_and_a_damaged_file(exported, tmp_path):
    """`write_warmup_requests` gives any of our SavedModels the file (one request per bucket
    and batch size); a damaged file is an OSError naming it, as TF Serving would refuse it."""
    from keras_transformer.export.warmup import read_warmup_requests, replay_warmup_requests, write_warmup_requests

    _, _, path = exported
    copy = str(tmp_path / "1")
    shutil.copytree(path, copy)
    os.remove(os.path.join(copy, "assets.extra", "tf_serving_warmup_requests"))
    assert read_warmup_requests(copy) == []
    write_warmup_requests(copy, batch_sizes=(1, 3))
    requests = read_warmup_requests(copy)
    texts = [inputs["inputs"].tolist() for _, inputs in requests]
    assert [len(t) for t in texts] == [1, 3, 1, 3] and texts[1] == [texts[0][0]] * 3
    seen = []
    assert replay_warmup_requests(lambda name, inputs: seen.append((name, inputs)), copy)[0] == 4
    assert [(name, inputs["inputs"].tolist()) for name, inputs in seen] == [("serving_default", t) for t in texts]

    def refused(name, inputs):
        raise ValueError("refused")

    with pytest.raises(OSError, match="The warm-up request for the signature 'serving_default' .* failed: refused"):
        replay_warmup_requests(refused, copy)
    for bad in ((0,), (1.5,), 4, (True,), (1,) * 501):
        with pytest.raises(ValueError, match="batch_sizes"):
            write_warmup_requests(copy, batch_sizes=bad)
    with open(os.path.join(copy, "assets.extra", "tf_serving_warmup_requests"), "wb") as f:
        f.write(b"not a TFRecord file")
    with pytest.raises(OSError, match="tf_serving_warmup_requests"):
        read_warmup_requests(copy)
    with pytest.raises(FileNotFoundError, match="metadata.json"):
        write_warmup_requests(str(tmp_path))


def test_every_weight_is_stored_once_and_the_output_projections_table_transposed(exported, translate):
    # The search reads the transposed table, a weight of its own
    # (`saved_model.FrozenModel`), where the model transposes its table at
    # every call.
    model, _, path = exported
    size = os.path.getsize(os.path.join(path, "variables", "variables.data-00000-of-00001"))
    table = keras.ops.convert_to_numpy(model.embedding.embeddings)  # (vocab, d_model)
    stored = 4 * (model.count_params() + table.size)
    assert stored <= size < 1.1 * stored
    frozen = [v for v in translate.loaded.weights if "output_projection_table" in v.name]
    assert len(frozen) == 1 and not frozen[0].trainable
    np.testing.assert_array_equal(frozen[0].numpy(), table.T)


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
    with pytest.raises(FileExistsError, match=re.escape(f"{path!r} already exists")):
        export(model, os.path.join(path, "assets", "tokenizer.model"), os.path.dirname(path), version=10)


def test_translate_with_a_keras_file_plots_its_attention_and_one_head(exported, tmp_path, capsys, monkeypatch):
    import matplotlib.image

    from keras_transformer.cli import main

    model, sp, _ = exported
    model_file, tokenizer_file = str(tmp_path / "model.keras"), str(tmp_path / "tokenizer.model")
    model.save(model_file)
    with open(tokenizer_file, "wb") as f:
        f.write(sp.serialized_model_proto())
    translate = ["translate", model_file, "Hello there.", "--tokenizer", tokenizer_file, "--plot-attention"]
    capsys.readouterr()
    assert main(translate + [str(tmp_path / "every.png")]) == 0
    assert capsys.readouterr().out.strip() == in_memory_translations(model, sp, ["Hello there."])[0][0]
    assert main(translate + [str(tmp_path / "one.png"), "--head", "1"]) == 0
    # The mean of the 2 heads and each head, three panels; one head, one panel.
    every, one = (matplotlib.image.imread(tmp_path / name) for name in ("every.png", "one.png"))
    assert every.shape[0] == one.shape[0] and every.shape[1] > 2.5 * one.shape[1]
    # A head the model lacks, or --head alone, is refused before anything is translated.
    import keras_transformer.cli.translate as command

    monkeypatch.setattr(command, "translate_chunks", lambda *args: pytest.fail("translated before refusing --head"))
    with pytest.raises(ValueError, match=r"Argument `--head` must be in \[0, 2\), the model's heads. Received: --head=2"):
        main(translate + [str(tmp_path / "none.png"), "--head", "2"])
    with pytest.raises(ValueError, match="--head applies to --plot-attention"):
        main(translate[:-1] + ["--head", "1"])
    assert not (tmp_path / "none.png").exists()


# `keras-transformer export` with every option of the graph it can combine --


# A beam of 2, alpha 1, the exact stop rule, truncation, 20 extra tokens (a
# source budget of 44), one bucket below it, one decoding loop (not the
# default two, whose split of a batch the copying export's tests above
# cover), int8 weights.
DECODING = dict(beam_size=2, alpha=1.0, stop="exact", long_inputs="truncate", max_extra_length=20)


@pytest.fixture(scope="module")
def command_line_export(exported, tmp_path_factory):
    """`(quantized model in memory, SentencePiece processor, version folder, model file, tokenizer file)`."""
    from keras_transformer import Transformer
    from keras_transformer.cli import main

    model, sp, _ = exported
    folder = tmp_path_factory.mktemp("command_line")
    model_file, tokenizer_file = str(folder / "model.keras"), str(folder / "tokenizer.model")
    model.save(model_file)
    with open(tokenizer_file, "wb") as f:
        f.write(sp.serialized_model_proto())
    export = ["export", model_file, "--tokenizer", tokenizer_file, "--output-dir", str(folder / "saved" / "copy")]
    with pytest.raises(SystemExit, match="--metadata"):
        main(export + ["--metadata", "[1, 2]"])
    options = ["--version", "3", "--quantize", "int8", "--beam-size", "2", "--alpha", "1.0", "--stop", "exact",
               "--long-inputs", "truncate", "--max-extra-length", "20", "--buckets", "8", "--parallel-loops", "1",
               "--metadata", '{"bleu": 1.5}', "--warmup-batch-sizes", "1", "4", "--signatures", "score"]
    left = killed_while_exporting(export + options, folder / "saved" / "copy")
    assert left and not [name for name in left if name.isdigit()]  # no version, whole or not
    assert main(export + options) == 0
    assert sorted(os.listdir(folder / "saved" / "copy")) == ["3"]  # what the killed export left is gone
    quantized = Transformer.from_config(model.get_config())
    quantized.build(((None, None), (None, None)))
    quantized.set_weights(model.get_weights())
    quantized.quantize("int8")
    return quantized, sp, str(folder / "saved" / "copy" / "3"), model_file, tokenizer_file


@pytest.fixture(scope="module")
def command_line_graph(command_line_export):
    """The command line's SavedModel, loaded once for this module."""
    import tensorflow as tf

    return tf.saved_model.load(command_line_export[2])


def killed_while_exporting(argv, export_dir):
    """What `keras-transformer ARGV` leaves in `export_dir` when killed
    with SIGKILL while it writes there."""
    import signal
    import subprocess
    import sys
    import time

    process = subprocess.Popen([sys.executable, "-m", "keras_transformer.cli", *argv], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not any(name.startswith(".export-") and os.path.isdir(os.path.join(export_dir, name))
                      for name in (os.listdir(export_dir) if os.path.isdir(export_dir) else [])):
            assert process.poll() is None and time.monotonic() < deadline, "the export did not start its folder"
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    return os.listdir(export_dir)


@pytest.fixture(scope="module")
def quantized_translations(command_line_export):
    """`{sentence: (translation, score)}` of `SENTENCES` by beam search over the quantized model in memory."""
    quantized, sp, _, _, _ = command_line_export
    texts, scores = in_memory_translations(quantized, sp, SENTENCES, beam_size=2, alpha=1.0, max_extra_length=20,
                                           stop="exact")
    assert texts[:2] == SENTENCES[:2]  # still the copying model
    return dict(zip(SENTENCES, zip(texts, scores)))


def test_the_command_line_export_writes_its_options(command_line_export, command_line_graph):
    import tensorflow as tf

    quantized, _, path, _, _ = command_line_export
    metadata = json.load(open(os.path.join(path, "assets.extra", "metadata.json")))
    assert {name: metadata[name] for name in DECODING} == DECODING
    assert metadata["buckets"] == [8, 64 - 20] and metadata["parallel_loops"] == 1
    assert metadata["quantize"] == "int8" and metadata["bleu"] == 1.5
    assert sorted(command_line_graph.signatures) == ["score", "serving_default"]  # --signatures
    warmup = [r for r in parse_warmup_file(path) if r.predict_log.request.model_spec.signature_name != "score"]
    # serving_default's: 2 buckets x 2 batch sizes
    assert [r.predict_log.request.inputs["inputs"].tensor_shape.dim[0].size for r in warmup] == [1, 4, 1, 4]
    # One int8 tensor (kernel, or embedding table) per quantized layer.
    dtypes = tf.train.load_checkpoint(os.path.join(path, "variables", "variables")).get_variable_to_dtype_map()
    assert sum(dtype == tf.int8 for dtype in dtypes.values()) == sum(
        layer.quantization_mode == "int8" for layer in quantized._flatten_layers()
    ) > 0


def test_the_command_line_export_translates_as_the_quantized_model_in_memory(command_line_export, command_line_graph,
                                                                              quantized_translations):
    """Its graph, in batches of 1, 2, 5 and 9 inputs (a blank one among
    them), and `Translator.from_saved_model`
    (what `translate`, `evaluate` and `score` run on a SavedModel folder:
    the exported weights, int8 layers rebuilt, tokenizer and settings,
    without loading the graph) translate as beam search over the model
    quantized in memory."""
    import tensorflow as tf

    from keras_transformer import Translator

    _, _, path, _, _ = command_line_export
    expected = quantized_translations
    translate = command_line_graph.signatures["serving_default"]
    for batch in (SENTENCES[:1], SENTENCES[:2], SENTENCES[:5], SENTENCES + [""]):
        out = translate(inputs=tf.constant(batch))
        assert [t.decode() for t in out["translations"].numpy()] == [expected.get(s, ("",))[0] for s in batch]
        np.testing.assert_allclose(out["scores"].numpy(), [expected.get(s, ("", 0.0))[1] for s in batch], rtol=1e-4)
    loaded = Translator.from_saved_model(os.path.dirname(path), batch_size=3)
    assert {name: getattr(loaded, name, None) for name in ("beam_size", "alpha", "stop", "max_extra_length")} == {
        name: DECODING[name] for name in ("beam_size", "alpha", "stop", "max_extra_length")}
    assert (loaded.preprocessor.long_inputs, list(loaded.preprocessor.buckets), loaded.batch_size) == (
        "truncate", [8, 44], 3)
    assert loaded.translate(SENTENCES) == [expected[s][0] for s in SENTENCES]


def test_an_export_that_records_no_stop_rule_was_made_by_the_exact_rule(exported, tmp_path):
    from keras_transformer import Translator

    assert Translator.from_saved_model(exported[2]).stop == "early"  # the default, recorded
    copy = str(tmp_path / "1")
    shutil.copytree(exported[2], copy)
    metadata = os.path.join(copy, "assets.extra", "metadata.json")
    with open(metadata) as f:
        settings = json.load(f)
    assert settings["stop"] == "early"
    with open(metadata, "w") as f:
        json.dump({k: v for k, v in settings.items() if k != "stop"}, f)
    assert Translator.from_saved_model(copy).stop == "exact"


def test_from_saved_model_refuses_other_settings_and_an_export_without_weight_names(command_line_export, tmp_path):
    from keras_transformer import Translator

    _, _, path, _, _ = command_line_export
    with pytest.raises(ValueError, match=r"as it was exported: beam_size cannot change\. Received: beam_size=4"):
        Translator.from_saved_model(path, beam_size=4)
    copy = str(tmp_path / "1")
    shutil.copytree(path, copy)
    metadata = os.path.join(copy, "assets.extra", "metadata.json")
    with open(metadata) as f:
        settings = json.load(f)
    with open(metadata, "w") as f:
        json.dump({k: v for k, v in settings.items() if k != "weights"}, f)
    with pytest.raises(ValueError, match=r"no model config and weight names.*Re-export it"):
        Translator.from_saved_model(copy)
