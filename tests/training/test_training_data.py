"""`keras_transformer.training.training_data`: `read_corpus` without TensorFlow (NumPy batches, what a JAX GPU
machine trains on), and `train --corpus-file`. Your own files: tests/training/test_own_files.py."""

import gzip
import os
from collections import Counter

import pytest

from keras_transformer import datasets
from keras_transformer.cli import main
from keras_transformer.data import bucket_boundaries
from keras_transformer.training import training_data
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID

PAIRS = datasets.load("libreoffice_en_de", "validation")[:300]


def _rows(batch):
    """The (source, labels) ids of a batch's real rows (filler rows carry no label)."""
    (source, target_in), labels = batch
    rows = []
    for s, t, l in zip(source, target_in, labels):
        if (l != PAD_ID).any():
            assert t[0] == BOS_ID and (t[1:][l[:-1] != PAD_ID] == l[:-1][l[:-1] != PAD_ID]).all()  # labels = inputs shifted
            rows.append((tuple(int(i) for i in s if i != PAD_ID), tuple(int(i) for i in l if i != PAD_ID)))
    return rows


def test_read_corpus_without_tensorflow_gives_every_pair_once_per_pass_in_a_few_shapes(monkeypatch):
    monkeypatch.setattr(datasets, "load", lambda name, split: PAIRS)
    monkeypatch.setattr(training_data, "_has_tensorflow", lambda: False)
    train, valid, tokenizer = training_data.read_corpus("libreoffice_en_de", tokens_per_batch=1024, seed=3, vocab_size=400)
    assert callable(train) and callable(valid) and tokenizer.vocab_size == 400
    # Reference: each pair encoded on its own; source [ids, EOS], labels [ids, EOS].
    references = []  # in the corpus's order
    for source, target in PAIRS:
        s, t = tokenizer.encode([source])[0], tokenizer.encode([target])[0]
        if len(s) + 1 <= 128 and len(t) + 2 <= 128:  # special tokens included: EOS; BOS and EOS
            references.append((tuple(s) + (EOS_ID,), tuple(t) + (EOS_ID,)))
    expected = Counter(references)
    passes = [list(train(index)) for index in (0, 1)]
    for batches in passes:
        assert Counter(row for batch in batches for row in _rows(batch)) == expected
        shapes = {batch[0][0].shape for batch in batches}
        assert {length for _, length in shapes} <= set(bucket_boundaries(128))  # make_dataset's padded lengths
        assert len(shapes) <= len(bucket_boundaries(128)) and all(rows * length <= 1024 for rows, length in shapes)
    orders = [[row for batch in batches for row in _rows(batch)] for batches in passes]
    assert orders[0] != orders[1]  # each pass reshuffled
    # Validation: every pair once, in the corpus's order within each padded
    # length (a batch holds pairs of one length bucket), and alike every pass.
    validation = list(valid(0))
    assert Counter(row for batch in validation for row in _rows(batch)) == expected
    for length in {batch[0][0].shape[1] for batch in validation}:
        rows = [row for batch in validation if batch[0][0].shape[1] == length for row in _rows(batch)]
        assert rows == [row for row in references if row in set(rows)], length
    assert [_rows(b) for b in valid(1)] == [_rows(b) for b in validation]


def test_train_corpus_file_leaves_held_out_sources_out_and_is_checked(tmp_path, monkeypatch):
    train_pairs = datasets.load("tatoeba_en_fr", "train")[:40]
    held_out = datasets.load("tatoeba_en_fr", "test")[:5]
    full = tmp_path / "tatoeba_en_fr.tsv.gz"
    with gzip.open(full, "wt", encoding="utf-8") as f:
        for english, french in train_pairs + held_out:
            f.write(f"{english}\t{french}\tCC-BY 2.0 (France)\n")
    monkeypatch.setattr(training_data, "_has_tensorflow", lambda: False)
    train, _, tokenizer = training_data.read_corpus("tatoeba_en_fr", 2048, seed=0, vocab_size=400, corpus_file=str(full))
    sources = {tokenizer.decode([list(s[:-1])])[0] for batch in train(0) for s, _ in _rows(batch)}
    assert sources == {english for english, _ in train_pairs}
    run = tmp_path / "run"
    base = ["train", "--architecture", "tiny", "--output-dir", str(run), "--train-steps", "1"]
    with pytest.raises(ValueError, match="--corpus-file.*Received: --corpus='libreoffice_en_de'"):
        main(base + ["--corpus", "libreoffice_en_de", "--corpus-file", str(full)])
    with pytest.raises(FileNotFoundError, match="--corpus-file.*missing.tsv.gz"):
        main(base + ["--corpus", "tatoeba_en_fr", "--corpus-file", str(tmp_path / "missing.tsv.gz")])
    assert not os.path.exists(run)
