"""Training batches: token ids bucketed by length under a token budget.

Each element is `((source_ids, target_input_ids), labels)`, int32, padded
with `PAD_ID = 0`:

- `source_ids`        `(batch, length)`: the source ids + EOS.
- `target_input_ids`  `(batch, length)`: BOS + the target ids.
- `labels`            `(batch, length)`: the target ids + EOS, i.e. the
  decoder input shifted left by one.

Source and target of a batch share one padded length, a bucket boundary of
`bucket_boundaries(max_length)`, so XLA sees a small fixed set of shapes.
Each batch holds at most `tokens_per_batch` tokens (batch x padded length,
padding included). The budget is GLOBAL: with `num_replicas` replicas
(`tf.distribute`), every batch size is a multiple of `num_replicas` and each
replica gets `1 / num_replicas` of it. The paper's ~25,000 source + 25,000
target tokens per step is `tokens_per_batch=25000` over all replicas (or
several steps of gradient accumulation).

Pairs over `max_length` tokens (special tokens included) are dropped or
truncated (`length_policy`), pairs with a blank side left out, by the rule
of `keras_transformer.translation.preprocessor`; the returned `LengthReport` counts
them, and is also logged.

Example:

>>> dataset, report = make_dataset(pairs, tokenizer, tokens_per_batch=4096, max_length=128)
>>> print(report)          # 81790 pairs kept; 74 dropped and 0 truncated for being over 128 tokens; 0 left out for a blank side
>>> model.fit(dataset, epochs=10)      # model((source_ids, target_input_ids)) -> logits
"""

import numpy as np

from keras_transformer.data.lengths import (
    MAX_LENGTH,
    TOKENS_PER_BATCH,
    LengthReport,
    batch_sizes,
    bucket_boundaries,
    bucket_of,
    check_length_arguments,
    resolve_boundaries,
)
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID, split_target
from keras_transformer.translation.preprocessor import LENGTH_POLICY, TranslationPreprocessor

__all__ = ["LengthReport", "batch_sizes", "bucket_boundaries", "encode_pairs", "encoded_batches", "make_dataset", "numpy_batches"]


def make_dataset(
    pairs,
    tokenizer,
    tokens_per_batch=TOKENS_PER_BATCH,
    max_length=MAX_LENGTH,
    length_policy=LENGTH_POLICY,
    shuffle=True,
    seed=0,
    num_replicas=1,
    repeat=False,
    shuffle_buffer=100_000,
    log=print,
    boundaries=None,
):
    """A `tf.data.Dataset` of token-bucketed batches for `model.fit`.

    Args:
        pairs: a list of `(source, target)` strings, or a `tf.data.Dataset`
            of `(source, target)` `tf.string` scalars (streamed, e.g.
            `load_wmt14(..., as_dataset=True)`).
        tokenizer: a `SubwordTokenizer` (tokenizes in the graph).
        tokens_per_batch: int. Global token budget of a batch, padding
            included, across all replicas.
        max_length: int. Longest source or target, special tokens included.
        length_policy: `"drop"` or `"truncate"` longer pairs (counted).
        shuffle: shuffle pairs with `seed` (reshuffled each pass, the same
            sequence on every run). A list is shuffled whole; a stream
            through a buffer of `shuffle_buffer` pairs.
        seed: int.
        num_replicas: int. Batch sizes are multiples of it; the last batch
            of a bucket is cut to a multiple (counted as
            `report.remainder_per_pass`).
        repeat: repeat the pairs forever (for `steps_per_epoch`).
        shuffle_buffer: int. Buffer size for streamed inputs.
        log: callable that receives the length report (`None`: silent).
        boundaries: padded lengths, ending at `max_length`; default
            `bucket_boundaries(max_length)` (each about 1.25 times the
            last). Fewer, wider buckets: fewer compiled shapes, more padding.

    Returns:
        `(dataset, report)`: the dataset and a `LengthReport`.
    """
    import tensorflow as tf

    check_length_arguments(max_length, length_policy, tokens_per_batch, num_replicas)
    boundaries = resolve_boundaries(boundaries, max_length)
    sizes = batch_sizes(boundaries, tokens_per_batch, num_replicas)
    if isinstance(pairs, tf.data.Dataset):
        dataset, report = _streamed_examples(pairs, tokenizer, max_length, length_policy, shuffle, seed,
                                             repeat, shuffle_buffer)
        if log:
            log(f"Streaming pairs; length counts grow as the dataset is read (report: {report!r})")
    else:
        dataset, report, lengths = _listed_examples(pairs, tokenizer, max_length, length_policy, shuffle, seed, repeat)
        if not repeat and num_replicas > 1:
            counts = np.bincount([bucket_of(n, boundaries) for n in lengths], minlength=len(boundaries))
            report.remainder_per_pass = int(sum(c % s % num_replicas for c, s in zip(counts, sizes)))
        if log:
            log(str(report))

    dataset = dataset.bucket_by_sequence_length(
        _length,
        bucket_boundaries=[b + 1 for b in boundaries[:-1]],  # lengths <= b go to bucket b
        bucket_batch_sizes=sizes,
        padded_shapes=([None], [None]),
        padding_values=(np.int32(PAD_ID), np.int32(PAD_ID)),
        pad_to_bucket_boundary=False,
    )
    if num_replicas > 1:  # cut a bucket's last batch to a multiple of num_replicas
        def even(source, target):
            keep = tf.shape(source)[0] // num_replicas * num_replicas
            return source[:keep], target[:keep]

        dataset = dataset.map(even).filter(lambda source, _: tf.shape(source)[0] > 0)

    table = tf.constant(boundaries, tf.int32)

    def to_model_inputs(source, target):  # (batch, s), (batch, t) -> padded to a boundary
        longest = tf.maximum(tf.shape(source)[1], tf.shape(target)[1] - 1)
        padded = tf.gather(table, tf.searchsorted(table, tf.reshape(longest, [1]), side="left"))[0]
        source = tf.pad(source, [[0, 0], [0, padded - tf.shape(source)[1]]])  # (batch, padded)
        target = tf.pad(target, [[0, 0], [0, padded + 1 - tf.shape(target)[1]]])  # (batch, padded + 1)
        target_input, labels = split_target(target)
        return (source, target_input), labels

    dataset = dataset.map(to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE), report


def _length(source, target):
    import tensorflow as tf

    return tf.maximum(tf.shape(source)[0], tf.shape(target)[0] - 1)


def _training_pairs_graph(tokenizer, max_length, length_policy):
    """`(sources, targets) -> (source_ids, target_ids, counts)` in TensorFlow
    ops: the preprocessor's `training_pairs_graph` with one `GraphTokenizer`."""
    preprocessor = TranslationPreprocessor(tokenizer, max_length)
    op = preprocessor.graph_tokenizer()
    return lambda sources, targets: preprocessor.training_pairs_graph(sources, targets, op, length_policy)


def _listed_examples(pairs, tokenizer, max_length, length_policy, shuffle, seed, repeat):
    """A list of pairs: tokenized once up front (in the graph), exact report."""
    import tensorflow as tf

    pairs = list(pairs)
    if not pairs:
        raise ValueError("Argument `pairs` is empty: there is nothing to batch.")
    sources = tf.constant([s for s, _ in pairs], tf.string)
    targets = tf.constant([t for _, t in pairs], tf.string)
    source_ids, target_ids, counts = _training_pairs_graph(tokenizer, max_length, length_policy)(sources, targets)
    report = LengthReport(max_length, *(int(c) for c in counts.numpy()))
    kept = report.kept
    if not kept:
        raise ValueError(f"No pair left to batch ({report}).")
    lengths = np.maximum(source_ids.row_lengths().numpy(), target_ids.row_lengths().numpy() - 1)
    dataset = tf.data.Dataset.range(kept)  # pair indices
    if shuffle:
        dataset = dataset.shuffle(kept, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.map(lambda i: (source_ids[i], target_ids[i]))  # (s,), (t,)
    return dataset, report, lengths


def _streamed_examples(pairs, tokenizer, max_length, length_policy, shuffle, seed, repeat, shuffle_buffer):
    """A tf.data stream of string pairs: tokenized in the pipeline, counted in a variable."""
    import tensorflow as tf

    counters = tf.Variable(tf.zeros([4], tf.int64), trainable=False, name="length_counts")
    report = LengthReport(max_length, counters=counters)
    if shuffle:
        pairs = pairs.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        pairs = pairs.repeat()

    training_pairs = _training_pairs_graph(tokenizer, max_length, length_policy)

    def encode(sources, targets):  # (n,) strings
        source_ids, target_ids, counts = training_pairs(sources, targets)
        counters.assign_add(counts)
        rows = tf.data.Dataset.range(tf.cast(source_ids.nrows(), tf.int64))
        return rows.map(lambda i: (source_ids[i], target_ids[i]))  # (s,), (t,)

    dataset = pairs.batch(256).flat_map(encode)  # (s,), (t,) int32
    return dataset, report


def encode_pairs(pairs, tokenizer, max_length=MAX_LENGTH, length_policy=LENGTH_POLICY):
    """Pure-Python packed ids `(source, target)` of each pair kept (the
    preprocessor's `training_pairs`).

    Returns:
        `(sources, targets, report)`: two lists of int lists and a `LengthReport`.
    """
    check_length_arguments(max_length, length_policy)
    sources, targets, counts = TranslationPreprocessor(tokenizer, max_length).training_pairs(pairs, length_policy)
    return sources, targets, LengthReport(max_length, *counts)


def numpy_batches(
    pairs,
    tokenizer,
    tokens_per_batch=TOKENS_PER_BATCH,
    max_length=MAX_LENGTH,
    length_policy=LENGTH_POLICY,
    shuffle=True,
    seed=0,
    num_replicas=1,
    report=None,
    boundaries=None,
    fixed_shapes=False,
):
    """The same batches as NumPy int32 arrays, without TensorFlow.

    For JAX or PyTorch machines: tokenizes with the Python SentencePiece
    API, then buckets, pads and splits exactly like `make_dataset`. Yields
    `((source_ids, target_input_ids), labels)` for one pass over the pairs.
    Pass a `LengthReport`-like object as `report` to get the length counts
    (its `kept`/`dropped`/`truncated` are set).

    `boundaries` overrides the padded lengths (default
    `bucket_boundaries(max_length)`; fewer boundaries, fewer compiled
    shapes). With `fixed_shapes=True` the last, partial batch of each
    bucket is filled up with rows that carry no target token (source EOS,
    decoder BOS, labels all padding: no loss, no accuracy), so every batch
    has one of `len(boundaries)` shapes and a compiled step (XLA, `jax.jit`)
    is traced once per bucket instead of once more per pass.

    Example:

    >>> for (source, target_in), labels in numpy_batches(pairs, tokenizer, 4096):
    ...     loss = train_step(source, target_in, labels)   # (batch, length) each
    """
    check_length_arguments(max_length, length_policy, tokens_per_batch, num_replicas)
    sources, targets, counts = encode_pairs(pairs, tokenizer, max_length, length_policy)
    if report is not None:
        report._counts = counts._counts
    return encoded_batches(
        sources, targets, tokens_per_batch, max_length, shuffle, seed, num_replicas, boundaries, fixed_shapes
    )


def encoded_batches(
    sources, targets, tokens_per_batch=TOKENS_PER_BATCH, max_length=MAX_LENGTH, shuffle=True, seed=0, num_replicas=1,
    boundaries=None, fixed_shapes=False,
):
    """`numpy_batches` of pairs encoded already (`encode_pairs`' packed ids).

    Encode once, then call this for every pass: a pass then costs only the
    shuffling and the padding.
    """
    boundaries = resolve_boundaries(boundaries, max_length)
    sizes = batch_sizes(boundaries, tokens_per_batch, num_replicas)
    order = np.random.default_rng(seed).permutation(len(sources)) if shuffle else np.arange(len(sources))
    buckets = [[] for _ in boundaries]
    for index in order:
        bucket = bucket_of(max(len(sources[index]), len(targets[index]) - 1), boundaries)
        buckets[bucket].append(index)
        if len(buckets[bucket]) == sizes[bucket]:
            yield _numpy_batch(buckets[bucket], sources, targets, boundaries[bucket], sizes[bucket])
            buckets[bucket] = []
    for bucket, indices in enumerate(buckets):
        if not fixed_shapes:
            indices = indices[: len(indices) // num_replicas * num_replicas]
        if indices:
            rows = sizes[bucket] if fixed_shapes else len(indices)
            yield _numpy_batch(indices, sources, targets, boundaries[bucket], rows)


def _numpy_batch(indices, sources, targets, padded, rows):
    source = np.zeros((rows, padded), np.int32)  # (batch, padded)
    target = np.zeros((rows, padded + 1), np.int32)  # (batch, padded + 1)
    source[len(indices) :, 0] = EOS_ID  # filler rows: a source to attend to,
    target[len(indices) :, 0] = BOS_ID  # a decoder start, no labels
    for row, index in enumerate(indices):
        source[row, : len(sources[index])] = sources[index]
        target[row, : len(targets[index])] = targets[index]
    target_input, labels = split_target(target)
    return (source, target_input), labels
