"""examples/wmt14.py: its recipe, its argument checks, and a shortened run on
the shipped corpus whose files give the translations it printed and scored."""

import json
import os
import runpy

import keras
import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "wmt14.py")


@pytest.fixture
def example():
    return runpy.run_path(SCRIPT)  # defines the parser and main(); runs nothing


def recipe_of(example, argv):
    r = example["recipe"](example["parser"].parse_args(argv))
    return (r.architecture, r.vocab_size, r.tokens_per_batch, r.train_steps, r.warmup_steps, r.checkpoint_every, r.average)


def test_the_recipes(example):
    # The shipped corpus: the README's main job (tiny, 8000 pieces, 1200 steps of
    # 3072 tokens, warm-up a third of the run, a checkpoint every 200, mean of 3).
    assert recipe_of(example, []) == ("tiny", 8000, 3072, 1200, 400, 200, 3)
    # WMT14: the paper's base (37k pieces, 25k tokens, 100k steps, warm-up 4000,
    # mean of the last 5 checkpoints) and big (300k steps, the last 20).
    assert recipe_of(example, ["--data", "tfds"]) == ("base", 37000, 25000, 100_000, 4000, 1000, 5)
    assert recipe_of(example, ["--data", "tfds", "--architecture", "big"]) == ("big", 37000, 25000, 300_000, 4000, 1000, 20)
    short = ["--architecture", "small", "--train-steps", "60", "--vocab-size", "300", "--tokens-per-batch", "256"]
    assert recipe_of(example, short) == ("small", 300, 256, 60, 20, 60, 3)
    # Not a whole number of checkpoint intervals: one checkpoint, at the end.
    assert recipe_of(example, ["--train-steps", "1100"])[3:6] == (1100, 366, 1100)


@pytest.mark.parametrize("argv, message", [
    (["--train-steps", "0"], "--train-steps, --vocab-size, --tokens-per-batch and --test-limit must be positive"),
    (["--tokens-per-batch", "-512"], "must be positive"),
    (["--data", "tfds", "--pair", "de-en", "--source", "fr"], "--source must be one of ['de', 'en']"),
])
def test_bad_arguments_stop_the_job_before_any_work(example, tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as stopped:
        example["main"](argv + ["--output-dir", str(tmp_path / "run")])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "run")


def test_offline_wmt14_names_the_archives_and_where_they_go(example, tmp_path, monkeypatch):
    from tensorflow_datasets.core.download import downloader

    def no_network(url, **kwargs):
        raise ConnectionError(f"no network for {url}")

    monkeypatch.setattr(downloader, "_open_url", no_network)  # never touch the network
    data_dir = tmp_path / "tfds"  # nothing prepared there
    with pytest.raises(SystemExit, match="training-parallel-europarl-v7.tgz") as stopped:
        example["main"](["--data", "tfds", "--data-dir", str(data_dir), "--output-dir", str(tmp_path / "run")])
    assert f"manual_dir={str(data_dir / 'downloads' / 'manual')!r}" in str(stopped.value)
    assert not os.path.exists(tmp_path / "run")


@pytest.mark.slow  # trains, translates, exports and reloads
@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the example exports a SavedModel: TensorFlow pass")
def test_main_job_trains_evaluates_exports_and_reloads(example, tmp_path, capsys, monkeypatch):
    """The run's own files: its preset holds the averaged weights, and the
    SavedModel translates as the in-memory Translator did for the BLEU it
    printed and returned.

    200 steps of 512 tokens with 500 pieces (one checkpoint, no validation
    pass), on the first 10,000 training pairs: beam search then ends its
    translations and they depend on the source ("I like him." -> "J'ai é.",
    "Fix this." -> "C'est-."), with a chrF above 0 (their BLEU on 16
    sentences is 0 or a little more, depending on how many threads split
    the arithmetic, so it is not asserted above 0); after 200 steps of 256
    tokens, or on 5,000 pairs, every one was the same "J'" and quotes up to
    the length limit, or ".". The SavedModel gets one
    source-length bucket (16, which holds every test source) instead of
    export's five, and one decoding loop instead of two: each is another
    beam search to trace, and to load (tests/export checks both).
    """
    import functools

    import sacrebleu

    import keras_transformer.export
    from keras_transformer import Transformer, datasets

    # The name the example imports (`from keras_transformer.export import export`).
    one_bucket = functools.partial(keras_transformer.export.export, buckets=(16,), parallel_loops=1)
    monkeypatch.setattr(keras_transformer.export, "export", one_bucket)
    # The first 10,000 of the 81,864 training pairs: 200 batches of 512 tokens
    # use about 8,000 pairs, and tokenizing, bucketing and shuffling all of
    # them took a third of the run. The validation and test splits are whole.
    load = datasets.load
    monkeypatch.setattr(datasets, "load", lambda name, split: load(name, split)[:10_000] if split == "train" else load(name, split))
    bleu = example["main"]([
        "--output-dir", str(tmp_path), "--train-steps", "200", "--tokens-per-batch", "512", "--vocab-size", "500",
        "--test-limit", "16",
    ])
    out = capsys.readouterr().out
    assert "nrefs:" in out and "version:" in out  # the sacreBLEU signature
    assert "tatoeba_en_fr: 10000 training, " in out
    saved_model = tmp_path / "saved_models" / "tatoeba_en_fr" / "1"
    assert os.path.isfile(saved_model / "saved_model.pb")
    assert os.path.isfile(tmp_path / "average.weights.h5")

    # The run directory is a preset of the averaged weights (those the run translated with).
    model = Transformer.from_preset(tmp_path)
    averaged = Transformer(**model.get_config())
    averaged.build(((None, None), (None, None)))
    averaged.load_weights(tmp_path / "average.weights.h5")
    for saved, mean in zip(model.get_weights(), averaged.get_weights()):
        np.testing.assert_array_equal(saved, mean)

    # The in-memory `Translator` (beam 4, alpha 0.6) translated the first 16
    # test sources into test_translations.txt; the example reloaded its
    # SavedModel and printed its translations of the first 5: the same.
    # (That a SavedModel translates every input as the Translator does is
    # tests/serving/test_output_paths.py's.)
    sources, references = datasets.references(datasets.load("tatoeba_en_fr", "test"))
    sources, references = sources[:16], references[:16]
    with open(tmp_path / "test_translations.txt", encoding="utf-8") as f:
        hypotheses = f.read().split("\n")[:-1]
    assert len(hypotheses) == 16 and len({h for h in hypotheses if h}) >= 2, hypotheses  # not all "" or one sentence
    printed = out.split("[reloaded SavedModel]\n", 1)[1].splitlines()[:5]
    assert printed == [f"  {s}  ->  {h}" for s, h in zip(sources[:5], hypotheses)]

    # The BLEU it returns and the chrF it prints and stores are sacreBLEU's on
    # those translations against every reference of each source (None where
    # a source has fewer).
    streams = [[refs[i] if i < len(refs) else None for refs in references] for i in range(max(map(len, references)))]
    assert len(streams) > 1  # several references for some sources
    expected_bleu = sacrebleu.corpus_bleu(hypotheses, streams).score
    expected_chrf = sacrebleu.corpus_chrf(hypotheses, streams).score
    assert bleu == pytest.approx(expected_bleu, abs=1e-9)
    assert f"chrF2 = {expected_chrf:.2f} " in out and expected_chrf > 0
    metadata = json.load(open(saved_model / "assets.extra" / "metadata.json"))
    assert (metadata["bleu"], metadata["chrf"]) == (round(expected_bleu, 2), round(expected_chrf, 2))
