"""Greedy decoding: the most likely next token at every step."""

from keras import ops

from keras_transformer.decoding.common import (
    cache_lengths,
    check_optional_token,
    ensure_built,
    check_source_ids,
    log_softmax,
    output_lengths,
    step_logits,
)
from keras_transformer.decoding.defaults import MAX_EXTRA_LENGTH
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID


def greedy_decode(
    model,
    source_ids,
    max_length=None,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    use_cache=True,
    max_extra_length=MAX_EXTRA_LENGTH,
):
    """Decodes `source_ids` by taking the most likely token at each step.

    Written with `keras.ops` only and static shapes (a preallocated output
    buffer filled by `ops.slice_update` inside `ops.while_loop`), so it runs
    eagerly, under `tf.function(jit_compile=True)`, `jax.jit` and on PyTorch.
    The loop stops once every sentence has produced EOS or reached its
    length limit. With a cache it runs in segments over a growing cache
    (see `cache_lengths`).

    Args:
        model: a `Transformer`, or any object with `encode`, `init_cache`
            and `decode` of the same signatures.
        source_ids: int `(batch, source_length)`, padded with 0.
        max_length: int, number of output tokens. `None`: each sentence may
            produce its source length (without padding) + `max_extra_length`
            tokens, capped by the model's `max_length`.
        bos_id: int. First decoder input.
        eos_id: int or `None`. End of sentence; `None` never stops early
            (for benchmarks with a fixed output length).
        use_cache: bool. Decode one token per step with the key/value
            cache, or re-run the full decoder over the buffer every step.
        max_extra_length: int, see `max_length`.

    Returns:
        `(tokens, scores)`: int32 `(batch, length)`, the output tokens without
        BOS, EOS included, 0 after EOS; and float32 `(batch,)`, the sum of the
        tokens' log-probabilities (EOS included).

    Example:

    >>> model = Transformer.from_architecture("tiny", vocab_size=100)
    >>> tokens, scores = greedy_decode(model, [[5, 6, 7, 3]], max_length=8)
    >>> tokens.shape
    (1, 8)
    """
    check_optional_token("bos_id", bos_id)
    check_optional_token("eos_id", eos_id)
    source_ids = check_source_ids(source_ids)
    ensure_built(model)
    length, limits = output_lengths(model, source_ids, max_length, max_extra_length)
    batch = ops.shape(source_ids)[0]
    source_mask = ops.not_equal(source_ids, PAD_ID)
    memory = model.encode(source_ids)
    cache_ends = cache_lengths(model, length, use_cache)
    cache = model.init_cache(memory, cache_ends[0]) if use_cache else None

    # tokens: (batch, length + 1) int32: BOS, then the output, 0 after EOS.
    tokens = ops.concatenate(
        [ops.full((batch, 1), bos_id, dtype="int32"), ops.zeros((batch, length), dtype="int32")],
        axis=1,
    )
    state = (
        ops.convert_to_tensor(0, dtype="int32"),  # step: () int32
        tokens,
        ops.zeros((batch,), dtype="float32"),  # scores: (batch,) float32
        ops.less_equal(limits, 0),  # finished: (batch,) bool
        cache if use_cache else {},  # model cache, leaves (batch, ...)
    )

    def cond(step, tokens, scores, finished, cache):
        return ops.logical_and(ops.less(step, length), ops.logical_not(ops.all(finished)))

    def body(step, tokens, scores, finished, cache):
        logits, cache = step_logits(
            model, tokens, step, memory, source_mask, cache if use_cache else None, length
        )
        log_probs = log_softmax(logits)  # (batch, vocab) float32
        next_ids = ops.cast(ops.argmax(log_probs, axis=-1), "int32")
        next_ids = ops.where(finished, PAD_ID, next_ids)
        scores = scores + ops.where(finished, 0.0, ops.max(log_probs, axis=-1))
        tokens = ops.slice_update(tokens, (ops.zeros_like(step), step + 1), next_ids[:, None])
        done = ops.greater_equal(step + 1, limits)
        if eos_id is not None:
            done = ops.logical_or(done, ops.equal(next_ids, eos_id))
        finished = ops.logical_or(finished, done)
        return step + 1, tokens, scores, finished, cache if use_cache else {}

    for i, end in enumerate(cache_ends):  # the loop in segments, the cache extended between them
        if i:
            state = (*state[:4], model.extend_cache(state[4], end))
        state = ops.while_loop(
            lambda step, *rest, end=end: ops.logical_and(ops.less(step, end), cond(step, *rest)), body, tuple(state)
        )
    _, tokens, scores, _, _ = state
    return tokens[:, 1:], scores
