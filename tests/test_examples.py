"""examples/wmt14.py end to end on the shipped corpus, shortened."""

import os
import runpy

import keras
import pytest


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the example exports a SavedModel: TensorFlow pass")
def test_main_job_trains_evaluates_exports_and_reloads(tmp_path, capsys):
    """The run's own files (model.keras, tokenizer.model, the SavedModel) give
    the translations it printed and scored.

    200 steps of 512 tokens with 500 pieces: the shortest run found whose
    beam search gives non-empty translations that depend on the source
    ("I ..." -> "J'..."); after 20 steps of 2048 tokens with 2000 pieces every
    translation was "", which any SavedModel and any BLEU code reproduce.
    One checkpoint (no validation pass, the average of the last one) and two
    export buckets keep the run as short as that one.
    """
    import json

    import sacrebleu
    import tensorflow as tf

    from keras_transformer import datasets
    from keras_transformer.data import SubwordTokenizer
    from keras_transformer.decoding import Translator

    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "wmt14.py")
    module = runpy.run_path(script)
    bleu = module["main"]([
        "--output-dir", str(tmp_path), "--preset", "tiny", "--train-steps", "200", "--checkpoint-every", "200",
        "--average", "1", "--tokens-per-batch", "512", "--max-length", "32", "--vocab-size", "500",
        "--test-limit", "16", "--export-buckets", "16",
    ])
    out = capsys.readouterr().out
    assert "nrefs:" in out and "version:" in out  # the sacreBLEU signature
    saved_model = tmp_path / "saved_models" / "tatoeba_en_fr" / "1"
    assert os.path.isfile(saved_model / "saved_model.pb")
    assert os.path.isfile(tmp_path / "model.keras") and os.path.isfile(tmp_path / "average.weights.h5")

    # The in-memory Translator with the trained model and vocabulary the run
    # wrote, and the example's beam search (beam 4, alpha 0.6).
    model, tokenizer = keras.saving.load_model(tmp_path / "model.keras"), SubwordTokenizer.load(tmp_path)
    translator = Translator(model, tokenizer, beam_size=4, alpha=0.6)
    sources, references = datasets.references(datasets.load("tatoeba_en_fr", "test"))
    sources, references = sources[:16], references[:16]
    hypotheses = translator.translate(sources)
    assert len({h for h in hypotheses if h}) >= 2, hypotheses  # not "" or one sentence for every source

    # The SavedModel the example reloaded printed the Translator's translations
    # of the first 5 sources; loaded here, it translates all 16 alike.
    printed = out.split("[reloaded SavedModel]\n", 1)[1].splitlines()[:5]
    assert printed == [f"  {s}  ->  {h}" for s, h in zip(sources[:5], hypotheses)]
    reloaded = tf.saved_model.load(str(saved_model)).signatures["serving_default"]
    assert [t.decode() for t in reloaded(inputs=tf.constant(sources))["translations"].numpy()] == hypotheses

    # The BLEU it returns and the chrF it prints and stores are sacreBLEU's on
    # those translations against every reference of each source (None where
    # a source has fewer).
    streams = [[refs[i] if i < len(refs) else None for refs in references] for i in range(max(map(len, references)))]
    assert len(streams) > 1  # several references for some sources
    expected_bleu = sacrebleu.corpus_bleu(hypotheses, streams).score
    expected_chrf = sacrebleu.corpus_chrf(hypotheses, streams).score
    assert bleu == pytest.approx(expected_bleu, abs=1e-9)
    assert f"chrF2 = {expected_chrf:.2f} " in out
    metadata = json.load(open(saved_model / "assets.extra" / "metadata.json"))
    assert (metadata["bleu"], metadata["chrf"]) == (round(expected_bleu, 2), round(expected_chrf, 2))


def test_offline_wmt14_gives_the_way_out(tmp_path):
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "wmt14.py")
    module = runpy.run_path(script)
    with pytest.raises(SystemExit, match="manual_dir"):
        module["main"](["--data", "tfds", "--data-dir", str(tmp_path / "tfds"), "--manual-dir", str(tmp_path / "m"), "--output-dir", str(tmp_path)])


def test_invalid_step_counts_stop_the_job_before_any_work(tmp_path):
    # 1,000 steps in checkpoint intervals of 300 would train 1,200.
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "wmt14.py")
    module = runpy.run_path(script)
    with pytest.raises(SystemExit, match="multiple of `checkpoint_every`"):
        module["main"](["--train-steps", "1000", "--checkpoint-every", "300", "--output-dir", str(tmp_path / "run")])
    assert not os.path.exists(tmp_path / "run")


def test_full_tatoeba_file_with_numpy_input_stops_after_averaging(tmp_path, capsys):
    # The GPU-machine path (no TensorFlow needed): NumPy batches, train, average, model.keras.
    import gzip
    import json

    from keras_transformer import datasets

    train = datasets.load("tatoeba_en_fr", "train")[:400]
    test = datasets.load("tatoeba_en_fr", "test")[:50]
    corpus = tmp_path / "tatoeba_en_fr.tsv.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as f:
        f.writelines(f"{en}\t{fr}\tCC-BY 2.0 (France) Attribution: tatoeba.org\n" for en, fr in train + test)
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "wmt14.py")
    module = runpy.run_path(script)
    with pytest.raises(SystemExit, match="corpus-file"):
        module["main"](["--data", "tatoeba-full", "--corpus-file", str(tmp_path / "missing.tsv.gz")])
    run = tmp_path / "run"
    assert module["main"]([
        "--data", "tatoeba-full", "--corpus-file", str(corpus), "--input", "numpy", "--stop-after", "average",
        "--preset", "tiny", "--vocab-size", "300", "--tokens-per-batch", "1024", "--max-length", "32",
        "--bucket-growth", "1.5", "--train-steps", "4", "--checkpoint-every", "2", "--average", "2",
        "--dropout-rate", "0.2", "--max-train-seconds", "600", "--output-dir", str(run),
    ]) is None
    out = capsys.readouterr().out
    assert "[data] tatoeba_en_fr: 400 training" in out  # the test sources are held out
    summary = json.load(open(run / "summary.json"))
    assert summary["steps"] == 4 and summary["config"]["dropout_rate"] == 0.2
    assert summary["averaged"] == ["ckpt-0000000002.weights.h5", "ckpt-0000000004.weights.h5"]
    assert summary["config"]["dtype"]["config"]["name"] == "float32"
    assert os.path.isfile(run / "model.keras") and not os.path.exists(run / "saved_models")


def test_local_files_that_are_missing_or_too_few_are_named(tmp_path):
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "wmt14.py")
    module = runpy.run_path(script)
    single = tmp_path / "single.tsv"
    single.write_text("Hello.\tBonjour.\n")
    base = ["--data", "files", "--output-dir", str(tmp_path / "run")]
    with pytest.raises(SystemExit, match="missing.tsv"):
        module["main"](base + ["--train-files", str(tmp_path / "missing.tsv"), "--test-files", str(single)])
    with pytest.raises(SystemExit, match="--test-files must hold at least 2 pairs. Received: 1"):
        module["main"](base + ["--train-files", str(single), "--test-files", str(single)])
    assert not os.path.exists(tmp_path / "run")


def test_local_files_are_the_same_data_by_their_contents(tmp_path):
    import argparse

    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "wmt14.py")
    identity = runpy.run_path(script)["data_identity"]
    train, test = tmp_path / "train.tsv", tmp_path / "test.tsv"
    train.write_text("Hello.\tBonjour.\n")
    test.write_text("Yes.\tOui.\nNo.\tNon.\n")
    args = argparse.Namespace(data="files", train_files=[str(train)], test_files=[str(test)], vocab_size=100)
    first = identity(args, "files")
    assert identity(args, "files") == first
    train.write_text("Hello.\tSalut.\n")  # same name, other data: another run
    assert identity(args, "files") != first
    shipped = identity(argparse.Namespace(data="shipped", vocab_size=100), "tatoeba_en_fr")
    full = identity(argparse.Namespace(data="tatoeba-full", corpus_file=str(test), vocab_size=100), "tatoeba_en_fr")
    assert shipped != full  # one corpus name, two data sets
