"""Training batches: token ids grouped by length under a token budget.

Each element is `((source_ids, target_input_ids), labels)`, int32, padded
with 0: the source ends with EOS, the decoder input is BOS + target, the
labels are target + EOS (the decoder input shifted by one). Pairs of similar
length share a batch; each batch holds at most `tokens_per_batch` tokens
(batch size x padded length, for the longer of source and target), and is
padded to its bucket's boundary, so XLA sees a small fixed set of shapes.

`tokens_per_batch` is GLOBAL: under `tf.distribute` each of the
`num_replicas` replicas gets `1 / num_replicas` of every batch (batch sizes
are multiples of `num_replicas`). The paper trains on about 25,000 target
tokens per step; reach it with several batches per step (gradient
accumulation, see `keras_transformer.training`).

Sentences are tokenized once, up front, with the SentencePiece model in
Python (the same ids the in-graph `SubwordTokenizer.tokenize` gives), which
lets `LengthReport` count what was dropped or truncated before training
starts; `tf.data` then shuffles, buckets, pads and prefetches.
"""

import dataclasses

import numpy as np

from keras_transformer.data.tokenizer import BOS_ID, EOS_ID


@dataclasses.dataclass
class LengthReport:
    """How many pairs were kept, dropped or truncated for their length."""

    kept: int = 0
    dropped: int = 0
    truncated: int = 0
    max_length: int = 0

    def __str__(self):
        return (
            f"{self.kept} pairs kept; {self.dropped} dropped and {self.truncated} truncated "
            f"for being over {self.max_length} tokens"
        )


def encode_pairs(pairs, tokenizer, max_length=128, length_policy="drop"):
    """Token ids `(source + [EOS], [BOS] + target + [EOS])` for each pair.

    A pair whose source or target (with its special tokens) is longer than
    `max_length` is dropped (`length_policy="drop"`) or cut to fit
    (`"truncate"`, keeping EOS last); both are counted in the report.

    Returns:
        `(sources, targets, report)`: two lists of int lists and a
        `LengthReport`.
    """
    if length_policy not in ("drop", "truncate"):
        raise ValueError(f'Argument `length_policy` must be "drop" or "truncate". Received: {length_policy!r}')
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 3:
        raise ValueError(f"Argument `max_length` must be an integer >= 3. Received: max_length={max_length!r}")
    pairs = list(pairs)
    encoded_sources = tokenizer.encode([s for s, _ in pairs])
    encoded_targets = tokenizer.encode([t for _, t in pairs])
    report = LengthReport(max_length=max_length)
    sources, targets = [], []
    for source, target in zip(encoded_sources, encoded_targets):
        source, target = source + [EOS_ID], [BOS_ID] + target + [EOS_ID]
        if len(source) > max_length or len(target) > max_length:
            if length_policy == "drop":
                report.dropped += 1
                continue
            report.truncated += 1
            source = source[: max_length - 1] + [EOS_ID] if len(source) > max_length else source
            target = target[: max_length - 1] + [EOS_ID] if len(target) > max_length else target
        sources.append(source)
        targets.append(target)
        report.kept += 1
    return sources, targets, report


def bucket_boundaries(max_length, smallest=8, growth=1.25):
    """Padded lengths: 8, 10, 12, ... growing by about 25% up to `max_length`."""
    boundaries, length = [], smallest
    while length < max_length:
        boundaries.append(length)
        length = max(length + 2, int(round(length * growth / 2)) * 2)
    return boundaries + [max_length]


def batch_sizes(boundaries, tokens_per_batch, num_replicas=1):
    """Sentences per batch for each padded length, within the budget."""
    sizes = []
    for length in boundaries:
        size = tokens_per_batch // length // num_replicas * num_replicas
        if size < num_replicas:
            raise ValueError(
                f"Argument `tokens_per_batch`={tokens_per_batch} cannot hold {num_replicas} "
                f"sentence(s) of {length} tokens; raise it or lower `max_length`."
            )
        sizes.append(size)
    return sizes


def make_dataset(
    pairs,
    tokenizer,
    tokens_per_batch=4096,
    max_length=128,
    length_policy="drop",
    shuffle=True,
    seed=0,
    num_replicas=1,
    repeat=False,
    log=print,
):
    """A `tf.data.Dataset` of token-bucketed batches for `model.fit`.

    Args:
        pairs: list of (source, target) strings.
        tokenizer: a `SubwordTokenizer`.
        tokens_per_batch: int. Global token budget of a batch (padding
            included), across all replicas.
        max_length: int. Longest source or target, special tokens included.
        length_policy: `"drop"` or `"truncate"` longer pairs (counted).
        shuffle: shuffle pairs (seeded: the same order on every run).
        seed: int.
        num_replicas: int. Batch sizes are multiples of it, and batches are
            complete so every replica gets its share.
        repeat: repeat the pairs forever (shuffled anew each pass).
        log: where the length report goes (`None`: nowhere).

    Returns:
        `(dataset, report)`.

    Example:

    >>> dataset, report = make_dataset(load("tatoeba_en_fr"), tokenizer, tokens_per_batch=4096)
    >>> model.fit(dataset, epochs=1)
    """
    import tensorflow as tf

    sources, targets, report = encode_pairs(pairs, tokenizer, max_length, length_policy)
    if log:
        log(str(report))
    if not sources:
        raise ValueError(f"No pair left to batch ({report}).")
    boundaries = bucket_boundaries(max_length)
    sizes = batch_sizes(boundaries, tokens_per_batch, num_replicas)
    source_table, target_table = _ragged(sources), _ragged(targets)
    dataset = tf.data.Dataset.range(len(sources))  # pair indices
    if shuffle:
        dataset = dataset.shuffle(len(sources), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()

    dataset = dataset.map(lambda i: (source_table[i], target_table[i]))  # (length,) each

    def length(source, target):
        return tf.maximum(tf.shape(source)[0], tf.shape(target)[0])

    dataset = dataset.bucket_by_sequence_length(
        length,
        bucket_boundaries=[b + 1 for b in boundaries[:-1]],  # lengths <= b go to bucket b
        bucket_batch_sizes=sizes,
        padded_shapes=([None], [None]),
        pad_to_bucket_boundary=False,
        drop_remainder=num_replicas > 1,
    )

    def to_model_inputs(source, target):
        padded = _padded_length(tf.maximum(tf.shape(source)[1], tf.shape(target)[1]), boundaries)
        source = _pad_to(source, padded)  # (batch, padded)
        target = _pad_to(target, padded + 1)  # (batch, padded + 1)
        return (source, target[:, :-1]), target[:, 1:]

    return dataset.map(to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE), report


def _ragged(rows):
    import tensorflow as tf

    lengths = np.array([len(r) for r in rows], np.int64)
    return tf.RaggedTensor.from_row_lengths(np.concatenate(rows).astype(np.int32), lengths)


def _padded_length(length, boundaries):
    import tensorflow as tf

    table = tf.constant(boundaries, tf.int32)
    return tf.gather(table, tf.searchsorted(table, tf.reshape(length, [1]), side="left"))[0]


def _pad_to(ids, length):
    import tensorflow as tf

    return tf.pad(ids, [[0, 0], [0, length - tf.shape(ids)[1]]])


def numpy_batches(pairs, tokenizer, tokens_per_batch=4096, max_length=128, length_policy="drop", shuffle=True, seed=0):
    """The same batches as NumPy arrays, without TensorFlow.

    Yields `((source_ids, target_input_ids), labels)` int32 arrays for one
    pass over the pairs; for JAX or PyTorch machines without TensorFlow.
    """
    sources, targets, _ = encode_pairs(pairs, tokenizer, max_length, length_policy)
    boundaries = bucket_boundaries(max_length)
    sizes = dict(zip(boundaries, batch_sizes(boundaries, tokens_per_batch)))
    order = np.random.default_rng(seed).permutation(len(sources)) if shuffle else np.arange(len(sources))
    buckets = {b: [] for b in boundaries}
    for index in order:
        length = max(len(sources[index]), len(targets[index]))
        padded = boundaries[int(np.searchsorted(boundaries, length))]
        buckets[padded].append(index)
        if len(buckets[padded]) == sizes[padded]:
            yield _numpy_batch(buckets.pop(padded), sources, targets, padded)
            buckets[padded] = []
    for padded, indices in buckets.items():
        if indices:
            yield _numpy_batch(indices, sources, targets, padded)


def _numpy_batch(indices, sources, targets, padded):
    source = np.zeros((len(indices), padded), np.int32)
    target = np.zeros((len(indices), padded + 1), np.int32)
    for row, index in enumerate(indices):
        source[row, : len(sources[index])] = sources[index]
        target[row, : len(targets[index])] = targets[index]
    return (source, target[:, :-1]), target[:, 1:]
