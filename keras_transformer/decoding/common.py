"""Pieces shared by greedy decoding, beam search and the translator."""

import functools
import numbers

import keras
import numpy as np
from keras import ops

from keras_transformer.compat.decoding import take
from keras_transformer.tokens import PAD_ID
from keras_transformer.validation import check_non_negative_int

# A stand-in for minus infinity that stays finite in float16 (max 65504),
# even when two of them are added. Scores are float32 throughout, but a
# finite value keeps `0 * NEG_INF` and `NEG_INF - NEG_INF` free of NaNs.
NEG_INF = -3.0e4


def is_finished(score):
    """Whether a search's returned `score` is a hypothesis's: a rank that
    no hypothesis reached holds about `NEG_INF`."""
    return score > NEG_INF / 2


# The length penalties, by name: "gnmt", GNMT's ((5 + length) / 6) ** alpha
# (Wu et al., 2016), and "huggingface", length ** alpha, as Hugging Face's
# `generate`, Marian and CTranslate2 divide a score by; with it, beam search
# also stops a sentence as `generate` does (`beam_search.BeamSampler`).
LENGTH_PENALTIES = ("gnmt", "huggingface")


def check_length_penalty(kind):
    if kind not in LENGTH_PENALTIES:
        raise ValueError(f"Argument `length_penalty` must be one of {LENGTH_PENALTIES}. Received: length_penalty={kind!r}")
    return kind


def length_penalty(length, alpha, kind="gnmt"):
    """The length penalty `kind` (`LENGTH_PENALTIES`) of outputs of
    `length` tokens, EOS included: GNMT's ((5 + length) / 6) ** alpha by
    default (Wu et al., 2016)."""
    length = ops.cast(length, "float32")
    if kind == "huggingface":
        return ops.power(ops.maximum(length, 1.0), alpha)
    return ops.power((5.0 + length) / 6.0, alpha)


@functools.lru_cache(maxsize=4096)
def penalty_value(length, alpha, kind="gnmt"):
    """`length_penalty` as a Python float, one backend call per length and
    `alpha` (the cache holds every length of a model many times over)."""
    return float(ops.convert_to_numpy(length_penalty(length, alpha, kind)))


def check_alpha(alpha):
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not alpha >= 0:
        raise ValueError(f"Argument `alpha` must be a number >= 0. Received: alpha={alpha!r}")
    return float(alpha)


def model_max_length(model):
    """The longest sequence the model accepts, or `None` if unknown."""
    config = getattr(model, "transformer_config", None)
    if config is not None:
        return config.max_length
    return getattr(model, "max_length", None)


def ensure_built(model):
    """Builds a model that has not been called yet (its decoder layers are
    created on the first full call), with a 1 x 1 dummy batch."""
    if getattr(model, "built", True):
        return
    one = ops.ones((1, 1), dtype="int32")
    model((one, one))


def check_optional_token(name, value):
    if value is not None:
        check_non_negative_int(name, value)


def check_source_ids(source_ids):
    """Validates `source_ids` and returns an int32 tensor `(batch, length)`.

    Raises `ValueError` (naming the argument and what was received) for a
    wrong rank, a non-integer dtype, or, for host arrays, negative ids.
    """
    if isinstance(source_ids, (list, tuple)) or isinstance(source_ids, np.ndarray):
        array = np.asarray(source_ids)
        if array.dtype == object or not (
            np.issubdtype(array.dtype, np.integer) and array.dtype != np.bool_
        ):
            raise ValueError(
                "Argument `source_ids` must hold integer token ids in a "
                f"rectangular (batch, length) array. Received: dtype={array.dtype}"
            )
        if array.size and array.min() < 0:
            raise ValueError(
                "Argument `source_ids` must hold non-negative token ids. "
                f"Received: min(source_ids)={array.min()}"
            )
        source_ids = array
    ids = ops.convert_to_tensor(source_ids)
    if len(ids.shape) != 2:
        raise ValueError(
            "Argument `source_ids` must have shape (batch, length). "
            f"Received: source_ids.shape={tuple(ids.shape)}"
        )
    dtype = keras.backend.standardize_dtype(ids.dtype)
    if "int" not in dtype:
        raise ValueError(
            "Argument `source_ids` must hold integer token ids. "
            f"Received: source_ids of dtype {dtype}"
        )
    return ops.cast(ids, "int32")


def output_limit(source_length, max_extra_length, max_length):
    """A sentence's output length limit, as `output_lengths` gives it, for
    one source of `source_length` tokens (EOS included) and a model of
    `max_length`: for checks made before decoding."""
    return min(source_length + max_extra_length, max_length)


def output_lengths(model, source_ids, max_length, max_extra_length, dynamic=False):
    """The output buffer length and each sentence's own length limit.

    With `max_length=None` each sentence may produce up to its own source
    length (non-padding tokens) + `max_extra_length` tokens (the paper's
    "input length + 50"), capped by the model's `max_length`; the buffer is
    the padded source length + `max_extra_length`, capped the same way. For
    sources of a length unknown when tracing (a graph traced once for every
    width), the buffer is that length as a tensor where the loop's shapes
    may change (`dynamic`), else the model's `max_length`. A sentence
    therefore decodes alike alone and next to longer ones. An explicit
    `max_length` applies to every sentence.

    Returns:
        `(length, limits)`: a Python int (a scalar tensor where `dynamic`
        and the width is unknown) and an int32 tensor `(batch,)`.
    """
    cap = model_max_length(model)
    batch = ops.shape(source_ids)[0]
    if max_length is None:
        check_non_negative_int("max_extra_length", max_extra_length)
        width = source_ids.shape[1]
        if width is None and cap is None:
            raise ValueError(
                "Argument `source_ids` of unknown length needs a `max_length` (the output buffer is "
                f"preallocated): the model's or the argument. Received: source_ids.shape={tuple(source_ids.shape)}"
            )
        real = ops.sum(ops.cast(ops.not_equal(source_ids, PAD_ID), "int32"), axis=1)
        if width is None and dynamic:
            length = ops.maximum(ops.minimum(ops.shape(source_ids)[1] + max_extra_length, cap), 1)
            return length, ops.minimum(real + max_extra_length, length)
        length = cap if width is None else width + max_extra_length
        if cap is not None:
            length = min(length, cap)
        limits = ops.minimum(real + max_extra_length, length)
        return max(length, 1), limits
    if isinstance(max_length, bool) or not isinstance(max_length, numbers.Integral) or max_length < 1:
        raise ValueError(
            f"Argument `max_length` must be a positive integer or None. Received: max_length={max_length!r}"
        )
    if cap is not None and max_length > cap:
        raise ValueError(
            f"Argument `max_length` must be at most the model's max_length={cap}. "
            f"Received: max_length={max_length}"
        )
    return int(max_length), ops.full((batch,), int(max_length), dtype="int32")


# The self-attention cache's first length; it doubles while the decoding needs
# more positions (`cache_lengths`).
FIRST_CACHE_LENGTH = 16


def cache_lengths(model, length, use_cache):
    """The self-attention cache lengths the decoding loop runs through.

    The loop runs in segments: positions `[0, 16)` with a 16-position cache,
    then `[16, 32)` with the cache extended to 32, and so on, the last
    segment ending at `length` (`(16, 32, 66)` for a source bucket of 16 and
    50 extra tokens). A step's attention, cache write and beam reordering
    then cost about what the positions decoded so far need, not the whole
    `length`. A segment starts only if some sentence is still decoding.
    Each segment is another loop in a compiled function or SavedModel (its
    graph and first call grow with their number). A model without
    `extend_cache`, or decoding without a cache, runs one segment.
    """
    if not use_cache or not hasattr(model, "extend_cache"):
        return (length,)
    lengths, end = [], FIRST_CACHE_LENGTH
    while 2 * end < length:  # no last segment shorter than half the one before
        lengths.append(end)
        end *= 2
    return tuple(lengths) + (length,)


def top_k(x, k):
    """`ops.top_k(x, k)` over the last axis of `x` `(rows, n)`, the same
    values and indices (equal values by lower index), found in blocks.

    The `k` largest values lie in the `k` blocks of the largest maxima
    (equal maxima by lower block), so the search takes each block's
    maximum, the `k` best blocks in their order along the axis, and the
    `k` largest of their values. TensorFlow's `TopKV2` reads each value at a
    much higher cost than a maximum does, and a step of beam search takes
    the best `2 * beam` of `beam * vocab` candidates a sentence; so does
    XLA's top-k on CPUs. PyTorch's eager `topk` does not, and there, as
    where `n` has no divisor near the best block size, `ops.top_k` as it is.
    """
    n = x.shape[-1]
    size = None if keras.backend.backend() == "torch" else _block_size(n, k)
    if size is None:
        values, indices = ops.top_k(x, k)
        return values, ops.cast(indices, "int32")
    blocks = ops.reshape(x, (-1, n // size, size))  # (rows, blocks, size)
    _, best = ops.top_k(ops.max(blocks, axis=-1), k)  # (rows, k)
    best = ops.sort(ops.cast(best, "int32"), axis=-1)  # in their order along the axis
    candidates = gather_rows(blocks, best)  # (rows, k, size)
    values, within = ops.top_k(ops.reshape(candidates, (-1, k * size)), k)
    within = ops.cast(within, "int32")
    return values, gather_rows(best, within // size) * size + within % size


def write_column(x, column, index):
    """`x` `(..., L)` with `column` `(...)` written at position `index` of its last axis.

    `ops.slice_update`, but on TensorFlow a select: its `slice_update` is
    XLA's DynamicUpdateSlice, which TensorFlow without XLA (the exported
    SavedModel) runs as a small XLA program of its own at every step.
    """
    if keras.backend.backend() == "tensorflow":
        at = ops.equal(ops.arange(ops.shape(x)[-1], dtype="int32"), index)  # (L,)
        return ops.where(at, column[..., None], x)
    zero = ops.zeros_like(index)
    return ops.slice_update(x, (zero,) * (len(x.shape) - 1) + (index,), column[..., None])


def gather_rows(x, indices):
    """`x[b, indices[b, j]]` for x `(batch, n, ...)` and indices `(batch, m)`."""
    return take(x, indices, axis=1, batch_dims=1)


def _block_size(n, k):
    """The divisor of `n` nearest the size that reads least, `sqrt(n / k)`,
    if the blocks then save most of the reading; else None."""
    if n is None or n < 64 * k:
        return None
    best = (n / k) ** 0.5
    size = min((d for d in range(2, n) if n % d == 0), key=lambda d: abs(d - best), default=None)
    return size if size is not None and best / 2 <= size <= 2 * best else None


def suppressed_mask(model):
    """`(vocab,)` bool, True at the model's `suppressed_ids`, or None when it
    has none (as the paper's models)."""
    config = getattr(model, "transformer_config", None)
    ids = getattr(config, "suppressed_ids", ())
    if not ids:
        return None
    mask = np.zeros(getattr(config, "target_vocab_size", None) or config.vocab_size, dtype=bool)
    mask[list(ids)] = True
    return mask


def log_softmax(logits, suppressed=None):
    """Log-probabilities in float32, whatever the compute dtype; the tokens
    of the `suppressed` mask (`suppressed_mask`) get none of the probability."""
    logits = ops.cast(logits, "float32")
    if suppressed is not None:
        logits = ops.where(ops.convert_to_tensor(suppressed), NEG_INF, logits)
    return ops.log_softmax(logits, axis=-1)


def step_logits(model, tokens, step, memory, source_mask, cache, length, grows=False):
    """Next-token logits `(rows, vocab)` of the tokens at position `step`.

    With a cache, decodes the single token `tokens[:, step]` and returns the
    updated cache: written at `step`, or appended to a cache that `grows`
    (from `init_cache(memory)`, `step` positions long). Without one, re-runs
    the full causal decoder over the first `length` positions of the fixed
    buffer (later positions cannot influence position `step`) and takes
    position `step`.
    """
    if cache is not None:
        ids = ops.expand_dims(take(tokens, step, axis=1), 1)  # (rows, 1)
        logits, cache = model.decode(ids, None, source_mask, cache=cache, cache_update_index=None if grows else step)
        return ops.squeeze(logits, 1), cache
    rows, zero = ops.shape(tokens)[0], ops.zeros_like(step)
    logits = model.decode(tokens[:, :length], memory, source_mask)
    vocab = logits.shape[-1]
    return ops.slice(logits, (zero, step, zero), (rows, 1, vocab))[:, 0], cache
