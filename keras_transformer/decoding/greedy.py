"""Greedy decoding: the most likely next token at every step."""

from typing import Any, NamedTuple

from keras import ops

from keras_transformer.decoding.defaults import MAX_EXTRA_LENGTH
from keras_transformer.decoding.loop import decode
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID


class GreedyState(NamedTuple):
    """Greedy decoding's hypotheses, one per sentence."""

    seqs: Any  # (batch, 1, length + 1) int32: BOS, the output, 0 after EOS
    scores: Any  # (batch,) float32: the sum of the output's log-probabilities
    finished: Any  # (batch,) bool: the output ended (EOS or its length limit)


class GreedySampler:
    """The most likely token at every step: a sampler of `decode` (its
    `drop_finished` strategies included). Scores are the outputs' summed
    log-probabilities, EOS included."""

    width = 1
    num_return = 1
    result_fields = ("seqs", "scores")

    def start(self, batch, length, bos_id, limits):
        seqs = ops.concatenate(
            [ops.full((batch, 1, 1), bos_id, dtype="int32"), ops.zeros((batch, 1, length), dtype="int32")], axis=2
        )
        return GreedyState(seqs, ops.zeros((batch,), dtype="float32"), ops.less_equal(limits, 0))

    def tokens(self, state):
        return state.seqs

    def extend(self, state, log_probs, step, limits, eos_id):
        log_probs = log_probs[:, 0]  # (batch, vocab)
        next_ids = ops.where(state.finished, PAD_ID, ops.cast(ops.argmax(log_probs, axis=-1), "int32"))
        scores = state.scores + ops.where(state.finished, 0.0, ops.max(log_probs, axis=-1))
        seqs = ops.slice_update(state.seqs, (ops.zeros_like(step), ops.zeros_like(step), step + 1),
                                next_ids[:, None, None])
        done = ops.greater_equal(step + 1, limits)
        if eos_id is not None:
            done = ops.logical_or(done, ops.equal(next_ids, eos_id))
        return GreedyState(seqs, scores, ops.logical_or(state.finished, done)), None

    def done(self, state, step, limits):
        return state.finished

    def result(self, state):
        return state.seqs[:, 0, 1:], state.scores

    def get_config(self):
        return {"beam_size": 1}

    def __call__(self, model, source_ids, max_extra_length=MAX_EXTRA_LENGTH, drop_finished=False):
        return decode(model, source_ids, self, max_extra_length=max_extra_length, drop_finished=drop_finished)

    def __repr__(self):
        return "GreedySampler()"


def greedy_decode(
    model,
    source_ids,
    max_length=None,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    use_cache=True,
    max_extra_length=MAX_EXTRA_LENGTH,
    drop_finished=False,
):
    """Decodes `source_ids` by taking the most likely token at each step.

    `decode` with a `GreedySampler`: the loop stops once every sentence has
    produced EOS or reached its length limit, and runs eagerly, under
    `tf.function(jit_compile=True)`, `jax.jit` and on PyTorch.

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
        drop_finished: `False`, `True` or `"halves"`: what becomes of the
            sentences that are done (`keras_transformer.decoding.loop`).

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
    return decode(model, source_ids, GreedySampler(), max_length, bos_id, eos_id, use_cache, max_extra_length,
                  drop_finished)
