"""Samplers: how the decoding loop chooses its output tokens.

A sampler holds its settings and the steps of one search over the one
decoding loop (`keras_transformer.decoding.loop`). Called as
`sampler(model, source_ids, max_extra_length, narrow_batches)`, it decodes a
padded batch of model-ready source ids into `(tokens, scores)`. The
`Translator` and the SavedModel export hold one and call it alike.

The layout: this module holds the interface, `Sampler`, and the steps every
sampler of one output per sentence shares, `OneOutputSampler`; each search
has its own module: `GreedySampler` (`decoding.greedy`), `BeamSampler` and
`ConstrainedBeamSampler`, its lexically constrained form
(`decoding.beam_search`), and `RandomSampler` (`decoding.random_sampling`).
`keras_transformer.decoding.get_sampler` chooses greedy decoding or beam
search.

Example:

>>> sampler = BeamSampler(beam_size=4, alpha=0.6)
>>> tokens, scores = sampler(model, [[5, 6, 7, 3]])
"""

import abc
from typing import Any, NamedTuple

from keras import ops

from keras_transformer.decoding.common import check_alpha, check_length_penalty, length_penalty, write_column
from keras_transformer.decoding.defaults import ALPHA, MAX_EXTRA_LENGTH
from keras_transformer.decoding.loop import decode
from keras_transformer.tokens import PAD_ID


class Sampler(abc.ABC):
    """What the decoding loop calls: a sampler's interface.

    Attributes:
        width: hypotheses kept per sentence (the loop's rows a sentence).
        num_return: hypotheses returned per sentence.
        result_fields: the state's fields that `result` reads, which the
            loop keeps for each sentence as it finishes.
        takes_constraints: whether it meets terminology constraints
            (`with_constraints`).
    """

    width = 1
    num_return = 1
    result_fields = ()
    takes_constraints = False

    def __call__(self, model, source_ids, max_extra_length=MAX_EXTRA_LENGTH, narrow_batches=False, target_prefix=None,
                 constraints=None):
        return decode(model, source_ids, self, max_extra_length=max_extra_length, narrow_batches=narrow_batches,
                      target_prefix=target_prefix, constraints=constraints)

    @abc.abstractmethod
    def start(self, source_ids, length, bos_id, limits):
        """The first state, for `source_ids` `(batch, source_length)`, an
        output buffer of `length` tokens and each sentence's length `limits`."""

    @abc.abstractmethod
    def tokens(self, state):
        """`(batch, width, length + 1)` int32: each hypothesis's tokens, BOS first."""

    @abc.abstractmethod
    def extend(self, state, log_probs, step, limits, eos_id):
        """One step from `log_probs` `(batch, width, vocab)`: the new state
        and each new hypothesis's parent `(batch, width)` (None for width 1)."""

    @abc.abstractmethod
    def done(self, state, step, limits):
        """`(batch,)` bool: the sentence's outputs can no longer change."""

    @abc.abstractmethod
    def result(self, state):
        """`(tokens, scores)` of the final state."""

    @abc.abstractmethod
    def get_config(self):
        """The settings that make it: equal configurations decode alike."""

    def with_constraints(self):
        """This search, meeting terminology constraints: beam search only."""
        raise ValueError(f"Argument `constraints` needs beam search (beam_size >= 2). Received: sampler={self!r}")


class OneOutputState(NamedTuple):
    """The hypotheses of a sampler of one output per sentence."""

    seqs: Any  # (batch, 1, length + 1) int32: BOS, the output, 0 after EOS
    log_probs: Any  # (batch,) float32: the sum of the output's log-probabilities
    lengths: Any  # (batch,) int32: the output's tokens so far, EOS included
    finished: Any  # (batch,) bool: the output ended (EOS or its length limit)
    keys: Any  # (batch,) int32: sampling's per-sentence keys (0 for greedy decoding)


class OneOutputSampler(Sampler):
    """The steps of a sampler of one output per sentence, which chooses each
    next token with `choose`.

    Args:
        alpha: float >= 0. The score of an output is its log-probability
            (EOS included) over the length penalty of its length, as
            beam search scores (by default with its `ALPHA`); 0 gives the
            plain sum.
        length_penalty: the penalty's kind, `"gnmt"` (the default) or
            `"huggingface"` (`decoding.common.LENGTH_PENALTIES`).
    """

    result_fields = ("seqs", "log_probs", "lengths")

    def __init__(self, alpha=ALPHA, length_penalty="gnmt"):
        self.alpha = check_alpha(alpha)
        self.length_penalty = check_length_penalty(length_penalty)

    @abc.abstractmethod
    def choose(self, log_probs, state, step):
        """(batch,) int32: the next token of each sentence from its
        log-probabilities `(batch, vocab)`."""

    def keys(self, source_ids):
        """`(batch,)` int32: each sentence's key for drawing (0: none)."""
        return ops.zeros((ops.shape(source_ids)[0],), dtype="int32")

    def start(self, source_ids, length, bos_id, limits):
        batch = ops.shape(source_ids)[0]
        seqs = ops.concatenate(
            [ops.full((batch, 1, 1), bos_id, dtype="int32"), ops.zeros((batch, 1, length), dtype="int32")], axis=2
        )
        return OneOutputState(seqs, ops.zeros((batch,), dtype="float32"), ops.zeros((batch,), dtype="int32"),
                              ops.less_equal(limits, 0), self.keys(source_ids))

    def tokens(self, state):
        return state.seqs

    def extend(self, state, log_probs, step, limits, eos_id):
        log_probs = log_probs[:, 0]  # (batch, vocab)
        going_on = ops.logical_not(state.finished)
        next_ids = ops.where(going_on, self.choose(log_probs, state, step), PAD_ID)  # (batch,)
        chosen = ops.take_along_axis(log_probs, next_ids[:, None], axis=-1)[:, 0]  # (batch,)
        seqs = write_column(state.seqs, next_ids[:, None], step + 1)
        done = ops.greater_equal(step + 1, limits)
        if eos_id is not None:
            done = ops.logical_or(done, ops.equal(next_ids, eos_id))
        return OneOutputState(
            seqs, state.log_probs + ops.where(going_on, chosen, 0.0), state.lengths + ops.cast(going_on, "int32"),
            ops.logical_or(state.finished, done), state.keys,
        ), None

    def done(self, state, step, limits):
        return state.finished

    def result(self, state):
        scores = state.log_probs if self.alpha == 0 else state.log_probs / length_penalty(
            state.lengths, self.alpha, self.length_penalty)
        return state.seqs[:, 0, 1:], scores
