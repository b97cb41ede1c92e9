"""tf.data pipeline: token budget, no lost pairs, shifted labels, padding, replicas, NumPy path.

The batches under MirroredStrategy, as each replica gets them, are
tests/training/test_plain_keras.py's (its mirrored process makes them).
"""

import numpy as np
import pytest

from keras_transformer import datasets
from keras_transformer.data import (
    BOS_ID, EOS_ID, LengthReport, bucket_boundaries, encode_pairs, make_dataset, numpy_batches,
)

BUDGET, MAX_LENGTH = 512, 48


def _check_batch(source, target_in, labels, budget=BUDGET):
    """Shapes, dtype, budget, shift by one and zero padding of one batch."""
    assert source.dtype == target_in.dtype == labels.dtype == np.int32
    assert source.shape == target_in.shape == labels.shape  # one padded length per batch
    assert source.shape[0] * source.shape[1] <= budget
    np.testing.assert_array_equal(target_in[:, 1:], labels[:, :-1])  # labels = decoder input shifted by one
    assert (target_in[:, 0] == BOS_ID).all()
    for row_source, row_labels in zip(source, labels):
        for row in (row_source, row_labels):
            length = int((row != 0).sum())
            assert row[length - 1] == EOS_ID and not row[length:].any()  # ends with EOS, then only padding 0


def _rows(batches):
    return sorted(tuple(r[r != 0]) for (source, _), _ in batches for r in np.asarray(source))


# Pairs with a blank side: left out of training, as the preprocessor's blank rule says.
BLANK_PAIRS = [("", "Rien."), ("Nothing.", " "), ("\t", "\u00a0"), ("Again.", "\u3000\x85")]


def test_batches_respect_the_budget_and_lose_no_pair(tokenizer):
    pairs = datasets.load("tatoeba_en_fr", "validation")
    pairs = pairs + [("word " * 60, "mot " * 60), ("Short.", "phrase " * 60)]  # over max_length: dropped
    pairs = pairs + BLANK_PAIRS
    logged = []
    dataset, report = make_dataset(pairs, tokenizer, BUDGET, MAX_LENGTH, seed=3, log=logged.append)
    assert logged == [str(report)] and "dropped" in logged[0]
    shapes, batches = set(), []
    for (source, target_in), labels in dataset:
        _check_batch(source.numpy(), target_in.numpy(), labels.numpy())
        shapes.add(source.shape[1])
        batches.append(((source.numpy(), None), None))
    sources, _, expected = encode_pairs(pairs, tokenizer, MAX_LENGTH)
    assert (report.kept, report.dropped) == (expected.kept, expected.dropped) and report.dropped >= 2
    assert report.blank == expected.blank == sum(not s.strip() or not t.strip() for s, t in pairs) >= len(BLANK_PAIRS)
    assert report.kept + report.dropped + report.blank == len(pairs)
    assert _rows(batches) == sorted(tuple(s) for s in sources)  # every kept pair exactly once
    assert shapes <= set(bucket_boundaries(MAX_LENGTH)) and len(shapes) > 3  # a few fixed lengths


def test_truncate_policy_and_seeded_order(tokenizer):
    pairs = [("word " * 60, "mot " * 60), ("Hello.", "Salut."), (" ", "mot " * 60)]
    dataset, report = make_dataset(pairs, tokenizer, 256, 16, length_policy="truncate", log=None)
    assert (report.kept, report.truncated, report.dropped, report.blank) == (2, 1, 0, 1)
    for (source, target_in), labels in dataset:
        _check_batch(source.numpy(), target_in.numpy(), labels.numpy(), 256)
        assert source.shape[1] <= 16
    test = datasets.load("tatoeba_en_fr", "test")[:600]
    first = [b[1].numpy().tolist() for b in make_dataset(test, tokenizer, BUDGET, 32, seed=1, log=None)[0]]
    again = [b[1].numpy().tolist() for b in make_dataset(test, tokenizer, BUDGET, 32, seed=1, log=None)[0]]
    other = [b[1].numpy().tolist() for b in make_dataset(test, tokenizer, BUDGET, 32, seed=2, log=None)[0]]
    assert first == again and first != other


def test_streamed_tf_data_input_counts_while_reading(tokenizer):
    import tensorflow as tf  # here: the JAX and PyTorch passes collect this module too

    pairs = datasets.load("tatoeba_en_fr", "test")[:400] + [("word " * 60, "mot " * 60)] + BLANK_PAIRS
    strings = tf.data.Dataset.from_tensor_slices(([s for s, _ in pairs], [t for _, t in pairs]))
    dataset, report = make_dataset(strings, tokenizer, BUDGET, MAX_LENGTH, shuffle_buffer=64, log=None)
    batches = [((s.numpy(), t.numpy()), l.numpy()) for (s, t), l in dataset]
    for (source, target_in), labels in batches:
        _check_batch(source, target_in, labels)
    sources, _, expected = encode_pairs(pairs, tokenizer, MAX_LENGTH)
    assert (report.kept, report.dropped, report.truncated, report.blank) == (expected.kept, 1, 0, len(BLANK_PAIRS))
    assert _rows(batches) == sorted(tuple(s) for s in sources)


def test_numpy_batches_match_the_pipeline(tokenizer):
    pairs = datasets.load("tatoeba_en_fr", "test")[:500] + [("word " * 60, "mot " * 60)] + BLANK_PAIRS
    report = LengthReport(MAX_LENGTH)
    batches = list(numpy_batches(pairs, tokenizer, BUDGET, MAX_LENGTH, seed=0, report=report))
    for (source, target_in), labels in batches:
        _check_batch(source, target_in, labels)
    assert (report.kept, report.dropped, report.blank) == (500, 1, len(BLANK_PAIRS))
    dataset, _ = make_dataset(pairs, tokenizer, BUDGET, MAX_LENGTH, log=None)
    tf_batches = [((s.numpy(), None), None) for (s, _), _ in dataset]
    assert _rows(batches) == _rows(tf_batches)
    assert {b[0][0].shape[1] for b in batches} == {b[0][0].shape[1] for b in tf_batches}


def test_replica_batches_are_multiples_and_remainders_are_counted(tokenizer):
    pairs = datasets.load("tatoeba_en_fr", "test")[:500]
    dataset, report = make_dataset(pairs, tokenizer, BUDGET, MAX_LENGTH, num_replicas=4, log=None)
    sizes = [int(source.shape[0]) for (source, _), _ in dataset]
    assert all(size % 4 == 0 for size in sizes)
    assert sum(sizes) + report.remainder_per_pass == report.kept == 500


def test_bad_arguments_name_themselves(tokenizer):
    pairs = [("a", "b")]
    with pytest.raises(ValueError, match="length_policy"):
        make_dataset(pairs, tokenizer, length_policy="cut")
    with pytest.raises(ValueError, match="max_length"):
        make_dataset(pairs, tokenizer, max_length=2)
    with pytest.raises(ValueError, match="tokens_per_batch"):
        make_dataset(pairs, tokenizer, tokens_per_batch=64, max_length=128)
    with pytest.raises(ValueError, match="empty"):
        make_dataset([], tokenizer)


def test_fixed_shapes_fill_partial_batches_with_rows_that_carry_no_labels(tokenizer):
    pairs = datasets.load("tatoeba_en_fr", "test")[:300]
    boundaries = [16, MAX_LENGTH]
    plain = list(numpy_batches(pairs, tokenizer, BUDGET, MAX_LENGTH, seed=3, boundaries=boundaries))
    fixed = list(numpy_batches(pairs, tokenizer, BUDGET, MAX_LENGTH, seed=3, boundaries=boundaries, fixed_shapes=True))
    sizes = {16: BUDGET // 16, MAX_LENGTH: BUDGET // MAX_LENGTH}
    assert {b[0][0].shape for b in fixed} == {(sizes[n], n) for n in boundaries}  # one shape per bucket
    assert len(fixed) == len(plain) and any(b[0][0].shape[0] < sizes[b[0][0].shape[1]] for b in plain)
    for ((source, target_in), labels), ((real, _), _) in zip(fixed, plain):
        rows = len(real)
        np.testing.assert_array_equal(source[:rows], real)  # the same pairs, in the same order
        _check_batch(source[:rows], target_in[:rows], labels[:rows])
        assert (source[rows:, 0] == EOS_ID).all() and not source[rows:, 1:].any()
        assert (target_in[rows:, 0] == BOS_ID).all() and not target_in[rows:, 1:].any()
        assert not labels[rows:].any()  # filler rows: nothing to predict, no loss


def test_custom_boundaries_are_the_padded_lengths(tokenizer):
    pairs = datasets.load("tatoeba_en_fr", "test")[:300]
    dataset, _ = make_dataset(pairs, tokenizer, BUDGET, MAX_LENGTH, boundaries=[12, 24, MAX_LENGTH], log=None)
    assert {int(s.shape[1]) for (s, _), _ in dataset} <= {12, 24, MAX_LENGTH}
    with pytest.raises(ValueError, match="boundaries"):
        make_dataset(pairs, tokenizer, BUDGET, MAX_LENGTH, boundaries=[12, 24], log=None)
    with pytest.raises(ValueError, match="boundaries"):
        list(numpy_batches(pairs, tokenizer, BUDGET, MAX_LENGTH, boundaries=[1, MAX_LENGTH]))
