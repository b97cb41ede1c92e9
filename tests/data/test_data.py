"""Tokenizer, corpus readers, shipped corpus and the tf.data pipeline."""

import gzip

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import datasets
from keras_transformer.data.pipeline import bucket_boundaries
from keras_transformer.data import (
    BOS_ID, EOS_ID, ReadReport, SubwordTokenizer, load_wmt14, make_dataset, numpy_batches, read_aligned, read_tsv,
)

TEXTS = [
    "Où est la gare ?", "Il coûte 12,50 € « vraiment ».", "How are you? I'm fine.", "Ça va très bien, merci !",
    "The year 1984 was long.", "Élève, écoute : naïveté, cœur, façade.",
]


@pytest.fixture(scope="module")
def tokenizer():
    pairs = datasets.load("tatoeba_en_fr", "validation")
    return SubwordTokenizer.train([s for p in pairs for s in p] + TEXTS * 5, vocab_size=2000)


def test_round_trip_in_python_and_in_graph(tokenizer, tmp_path):
    assert tokenizer.decode(tokenizer.encode(TEXTS)) == TEXTS
    assert max(i for row in tokenizer.encode(TEXTS) for i in row) < tokenizer.vocab_size

    @tf.function
    def round_trip(strings):
        return tokenizer.detokenize(tokenizer.tokenize(strings))

    assert [t.decode() for t in round_trip(tf.constant(TEXTS)).numpy()] == TEXTS
    ids = tokenizer.tokenize(tf.constant(TEXTS)).to_list()
    assert ids == tokenizer.encode(TEXTS)  # the same ids in and out of the graph
    padded = tf.constant([[BOS_ID] + ids[0] + [EOS_ID, 0, 0, 7]])  # text after EOS is dropped
    assert tokenizer.detokenize(padded).numpy()[0].decode() == TEXTS[0]
    loaded = SubwordTokenizer.load(tokenizer.save(str(tmp_path)))
    assert loaded.encode(TEXTS) == tokenizer.encode(TEXTS)


def test_tokenizer_bad_input(tmp_path):
    with pytest.raises(ValueError, match="vocab_size"):
        SubwordTokenizer.train(TEXTS, vocab_size=0)
    with pytest.raises(ValueError, match="no non-empty sentence"):
        SubwordTokenizer.train(["", "  "])
    with pytest.raises(FileNotFoundError, match="nothing_here"):
        SubwordTokenizer.load(str(tmp_path / "nothing_here"))


def test_tsv_and_aligned_readers_skip_and_count_bad_lines(tmp_path):
    path = tmp_path / "bad.tsv.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"Hello\tBonjour\tCC-BY attribution\n\nno tab here\n\tvide\nbad \xff utf8\tx\nCat\tChat\n")
    report = ReadReport()
    assert list(read_tsv(str(path), report)) == [("Hello", "Bonjour"), ("Cat", "Chat")]
    assert report.pairs == 2
    assert report.skipped == {"empty line": 1, "line without a tab": 1, "pair with an empty side": 1, "invalid UTF-8": 1}
    assert (str(path), 3, "line without a tab") in report.examples
    with pytest.raises(ValueError, match=r"bad.tsv.gz:2: empty line"):
        list(read_tsv(str(path), strict=True))
    with pytest.raises(FileNotFoundError, match="missing.tsv"):
        list(read_tsv(str(tmp_path / "missing.tsv")))
    (tmp_path / "a.en").write_text("one\ntwo\n\nfour\n", encoding="utf-8")
    (tmp_path / "a.fr").write_text("un\ndeux\ntrois\nquatre\ncinq\n", encoding="utf-8")
    report = ReadReport()
    assert list(read_aligned(str(tmp_path / "a.en"), str(tmp_path / "a.fr"), report)) == [("one", "un"), ("two", "deux"), ("four", "quatre")]
    assert report.skipped == {"pair with an empty side": 1, "misaligned tail": 1}
    (tmp_path / "b.en").write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(ValueError, match="different numbers of lines"):
        list(read_aligned(str(tmp_path / "b.en"), str(tmp_path / "a.fr"), strict=True))


def test_shipped_corpus_splits_are_disjoint_by_source_and_deterministic():
    splits = {s: datasets.load("tatoeba_en_fr", s) for s in ("train", "validation", "test")}
    assert len(splits["train"]) > 60000 and 2000 < len(splits["test"]) < 4000
    keys = {s: {" ".join(e.lower().split()) for e, _ in pairs} for s, pairs in splits.items()}
    assert not keys["train"] & keys["test"] and not keys["train"] & keys["validation"]
    assert not keys["validation"] & keys["test"]
    assert datasets.load("tatoeba_en_fr", "test") == splits["test"]
    sources, references = datasets.references(splits["test"])
    assert len(sources) == len(references) > 1500 and max(map(len, references)) > 1
    with pytest.raises(ValueError, match="tatoeba_en_fr"):
        datasets.load("wmt99")
    with pytest.raises(ValueError, match="validation"):
        datasets.load("tatoeba_en_fr", "dev")


def test_batches_respect_the_budget_and_lose_no_pair(tokenizer):
    pairs = datasets.load("tatoeba_en_fr", "validation")
    pairs = pairs + [("word " * 60, "mot " * 60)]  # over max_length: dropped and counted
    dataset, report = make_dataset(pairs, tokenizer, tokens_per_batch=512, max_length=48, shuffle=True, seed=3, log=None)
    assert report.dropped >= 1 and report.kept + report.dropped == len(pairs)
    seen, shapes = [], set()
    for (source, target_in), labels in dataset:
        source, target_in, labels = source.numpy(), target_in.numpy(), labels.numpy()
        assert source.shape[0] * source.shape[1] <= 512 and source.dtype == np.int32
        assert target_in.shape == labels.shape
        np.testing.assert_array_equal(target_in[:, 1:], labels[:, :-1])  # shifted by one
        assert (target_in[:, 0] == BOS_ID).all()
        for row_source, row_labels in zip(source, labels):
            length = int((row_source != 0).sum())
            assert row_source[length - 1] == EOS_ID and not row_source[length:].any()  # padding is 0
            seen.append(tokenizer.decode([row_source])[0])
        shapes.add(source.shape[1])
    fits = [s for s, t in pairs if len(tokenizer.encode([s])[0]) + 1 <= 48 and len(tokenizer.encode([t])[0]) + 2 <= 48]
    assert len(fits) == report.kept and len(fits) < len(pairs)
    assert sorted(seen) == sorted(tokenizer.decode(tokenizer.encode(fits)))
    assert shapes <= set(bucket_boundaries(48))  # padded to a few fixed lengths


def test_truncate_policy_and_seeded_order(tokenizer):
    pairs = [("word " * 60, "mot " * 60), ("Hello.", "Salut.")]
    dataset, report = make_dataset(pairs, tokenizer, tokens_per_batch=256, max_length=16, length_policy="truncate", log=None)
    assert (report.kept, report.truncated, report.dropped) == (2, 1, 0)
    first = [b[1].numpy().tolist() for b in make_dataset(datasets.load("tatoeba_en_fr", "test"), tokenizer, 512, 32, seed=1, log=None)[0]]
    again = [b[1].numpy().tolist() for b in make_dataset(datasets.load("tatoeba_en_fr", "test"), tokenizer, 512, 32, seed=1, log=None)[0]]
    assert first == again


def test_numpy_batches_match_the_pipeline_contents(tokenizer):
    pairs = datasets.load("tatoeba_en_fr", "test")[:500]
    batches = list(numpy_batches(pairs, tokenizer, tokens_per_batch=512, max_length=48, seed=0))
    assert sum(b[0][0].shape[0] for b in batches) == 500
    for (source, target_in), labels in batches:
        assert source.shape[0] * source.shape[1] <= 512
        np.testing.assert_array_equal(target_in[:, 1:], labels[:, :-1])


def test_mirrored_strategy_splits_batches_over_replicas(tokenizer):
    import subprocess
    import sys

    script = r"""
import tensorflow as tf
tf.config.set_logical_device_configuration(tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
import sys
from keras_transformer import datasets
from keras_transformer.data import SubwordTokenizer, make_dataset
tokenizer = SubwordTokenizer.load(sys.argv[1])
strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
dataset, _ = make_dataset(datasets.load("tatoeba_en_fr", "test")[:300], tokenizer, 512, 32, num_replicas=2, log=None)
for (source, _), _ in strategy.experimental_distribute_dataset(dataset):
    parts = strategy.experimental_local_results(source)
    assert len(parts) == 2 and parts[0].shape == parts[1].shape, [p.shape for p in parts]
print("ok")
"""
    import tempfile

    folder = tempfile.mkdtemp()
    tokenizer.save(folder)
    run = subprocess.run([sys.executable, "-c", script, folder], capture_output=True, text=True)
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-2000:]


def test_tfds_wmt14_path_with_mock_data():
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=5):
        pairs = list(load_wmt14("de-en", source="en", split="train"))
        reverse = list(load_wmt14("de-en", source="de", split="train"))
    assert len(pairs) == 5 and all(isinstance(s, str) and isinstance(t, str) for s, t in pairs)
    assert [(t, s) for s, t in pairs] == reverse


def test_tfds_offline_error_says_what_to_place_where(tmp_path):
    with pytest.raises(RuntimeError, match="manual_dir") as error:
        list(load_wmt14("fr-en", data_dir=str(tmp_path / "tfds"), manual_dir=str(tmp_path / "manual")))
    assert "tatoeba_en_fr" in str(error.value)
    with pytest.raises(ValueError, match="pair"):
        list(load_wmt14("xx-en"))
