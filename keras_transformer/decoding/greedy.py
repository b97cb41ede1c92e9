"""Greedy decoding: the most likely next token at every step."""

from typing import Any, NamedTuple

from keras import ops

from keras_transformer.decoding.common import check_alpha, length_penalty, write_column
from keras_transformer.decoding.defaults import ALPHA, MAX_EXTRA_LENGTH
from keras_transformer.decoding.loop import Sampler, decode
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID


class GreedyState(NamedTuple):
    """The hypotheses of a sampler of one output per sentence."""

    seqs: Any  # (batch, 1, length + 1) int32: BOS, the output, 0 after EOS
    log_probs: Any  # (batch,) float32: the sum of the output's log-probabilities
    lengths: Any  # (batch,) int32: the output's tokens so far, EOS included
    finished: Any  # (batch,) bool: the output ended (EOS or its length limit)
    keys: Any  # (batch,) int32: sampling's per-sentence keys (0 for greedy decoding)


class GreedySampler(Sampler):
    """The most likely token at every step: a sampler of `decode` (its
    `drop_finished` strategies included).

    Args:
        alpha: float >= 0. The score of an output is its log-probability
            (EOS included) over the GNMT length penalty of its length, as
            beam search scores (by default with its `ALPHA`); 0 gives the
            plain sum.
    """

    width = 1
    num_return = 1
    result_fields = ("seqs", "log_probs", "lengths")

    def __init__(self, alpha=ALPHA):
        self.alpha = check_alpha(alpha)

    def start(self, source_ids, length, bos_id, limits):
        batch = ops.shape(source_ids)[0]
        seqs = ops.concatenate(
            [ops.full((batch, 1, 1), bos_id, dtype="int32"), ops.zeros((batch, 1, length), dtype="int32")], axis=2
        )
        return GreedyState(seqs, ops.zeros((batch,), dtype="float32"), ops.zeros((batch,), dtype="int32"),
                           ops.less_equal(limits, 0), self.keys(source_ids))

    def keys(self, source_ids):
        return ops.zeros((ops.shape(source_ids)[0],), dtype="int32")

    def tokens(self, state):
        return state.seqs

    def choose(self, log_probs, state, step):
        """(batch,) int32: the next token of each sentence from its
        log-probabilities `(batch, vocab)`."""
        return ops.cast(ops.argmax(log_probs, axis=-1), "int32")

    def extend(self, state, log_probs, step, limits, eos_id):
        log_probs = log_probs[:, 0]  # (batch, vocab)
        going_on = ops.logical_not(state.finished)
        next_ids = ops.where(going_on, self.choose(log_probs, state, step), PAD_ID)  # (batch,)
        chosen = ops.take_along_axis(log_probs, next_ids[:, None], axis=-1)[:, 0]  # (batch,)
        seqs = write_column(state.seqs, next_ids[:, None], step + 1)
        done = ops.greater_equal(step + 1, limits)
        if eos_id is not None:
            done = ops.logical_or(done, ops.equal(next_ids, eos_id))
        return GreedyState(
            seqs, state.log_probs + ops.where(going_on, chosen, 0.0), state.lengths + ops.cast(going_on, "int32"),
            ops.logical_or(state.finished, done), state.keys,
        ), None

    def done(self, state, step, limits):
        return state.finished

    def result(self, state):
        scores = state.log_probs if self.alpha == 0 else state.log_probs / length_penalty(state.lengths, self.alpha)
        return state.seqs[:, 0, 1:], scores

    def get_config(self):
        return {"beam_size": 1, "alpha": self.alpha}

    def __repr__(self):
        return f"GreedySampler(alpha={self.alpha})"


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

    Scores are the outputs' summed log-probabilities (`GreedySampler` with
    `alpha=0`).

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
    return decode(model, source_ids, GreedySampler(alpha=0.0), max_length, bos_id, eos_id, use_cache, max_extra_length,
                  drop_finished)
