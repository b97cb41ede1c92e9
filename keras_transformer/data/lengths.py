"""Length rules shared by the tf.data and NumPy pipelines (no TensorFlow here).

- Special tokens: sources and targets are packed by
  `keras_transformer.tokens` (the source `ids + [EOS]`, the target
  `[BOS] + ids + [EOS]`, split into the decoder input and the labels).
- Which pairs are kept (blank sides, `max_length`) is the preprocessor's
  rule (`keras_transformer.translation.preprocessor`); a `LengthReport` counts them.
- Buckets: a pair goes to the smallest boundary >= max(source length,
  target length - 1) and is padded to it, so XLA compiles one program per
  boundary (14 for `max_length=128`).
- Batch size of a bucket: `tokens_per_batch // boundary`, rounded down to a
  multiple of `num_replicas`, so `batch x padded length <= tokens_per_batch`.

Example:

>>> bucket_boundaries(64)
[8, 10, 12, 16, 20, 24, 30, 38, 48, 60, 64]
>>> batch_sizes([8, 64], tokens_per_batch=4096, num_replicas=2)
[512, 64]
"""

from keras_transformer.translation.preprocessor import check_length_policy

# The training defaults, defined once for the pipelines, `training_data` and
# `keras-transformer train`: the longest pair kept, in tokens with its
# special ones (unless the model's `max_length` is shorter), and the tokens a
# batch holds, all replicas together.
MAX_LENGTH = 128
TOKENS_PER_BATCH = 4096


class LengthReport:
    """How many pairs were kept, dropped or truncated for their length, and
    left out for a blank side.

    For a Python list of pairs the counts are final when `make_dataset`
    returns. For a streamed `tf.data` input they grow while the dataset is
    read (they sum over passes): read them after an epoch.

    Attributes:
        kept, dropped, truncated, blank: int counts (`kept` includes
            `truncated`).
        max_length: the bound applied.
        remainder_per_pass: pairs left out of each pass because a bucket's
            last batch was cut to a multiple of `num_replicas` (0 with one
            replica or `repeat=True`; different pairs every pass).
    """

    def __init__(self, max_length, kept=0, dropped=0, truncated=0, blank=0, counters=None):
        self.max_length = max_length
        self._counts = [kept, dropped, truncated, blank]
        self._counters = counters  # a tf.Variable int64 (4,) in streaming mode
        self.remainder_per_pass = 0

    def _count(self, index):
        if self._counters is not None:
            return int(self._counters[index].numpy())
        return self._counts[index]

    kept = property(lambda self: self._count(0))
    dropped = property(lambda self: self._count(1))
    truncated = property(lambda self: self._count(2))
    blank = property(lambda self: self._count(3))

    def __repr__(self):
        return (f"LengthReport(kept={self.kept}, dropped={self.dropped}, truncated={self.truncated}, "
                f"blank={self.blank}, max_length={self.max_length})")

    def __str__(self):
        text = (f"{self.kept} pairs kept; {self.dropped} dropped and {self.truncated} truncated "
                f"for being over {self.max_length} tokens; {self.blank} left out for a blank side")
        if self.remainder_per_pass:
            text += f"; {self.remainder_per_pass} left out of each pass to split batches evenly over replicas"
        return text


def check_length_arguments(max_length, length_policy, tokens_per_batch=None, num_replicas=1):
    check_length_policy(length_policy)
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 3:
        raise ValueError(f"Argument `max_length` must be an integer >= 3. Received: max_length={max_length!r}")
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
        raise ValueError(f"Argument `num_replicas` must be an integer >= 1. Received: num_replicas={num_replicas!r}")
    if tokens_per_batch is not None and (
        isinstance(tokens_per_batch, bool) or not isinstance(tokens_per_batch, int) or tokens_per_batch < 1
    ):
        raise ValueError(f"Argument `tokens_per_batch` must be a positive integer. Received: {tokens_per_batch!r}")


def bucket_boundaries(max_length, smallest=8, growth=1.25):
    """Padded lengths: 8, 10, 12, 16, ... each about `growth` times the last, then `max_length`."""
    boundaries, length = [], smallest
    while length < max_length:
        boundaries.append(length)
        length = max(length + 2, int(round(length * growth / 2)) * 2)
    return boundaries + [max_length]


def resolve_boundaries(boundaries, max_length):
    """`boundaries` sorted and checked, or `bucket_boundaries(max_length)` for `None`."""
    if boundaries is None:
        return bucket_boundaries(max_length)
    resolved = sorted({int(b) for b in boundaries})
    if not resolved or resolved[0] < 2 or resolved[-1] != max_length:
        raise ValueError(
            f"Argument `boundaries` must be padded lengths >= 2 ending at `max_length`={max_length}. "
            f"Received: boundaries={boundaries}"
        )
    return resolved


def batch_sizes(boundaries, tokens_per_batch, num_replicas=1):
    """Sentences per batch for each padded length, within the global budget."""
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


def bucket_of(length, boundaries):
    """Index of the smallest boundary >= length."""
    for index, boundary in enumerate(boundaries):
        if length <= boundary:
            return index
    raise ValueError(f"Length {length} is over the last boundary {boundaries[-1]}.")
