"""Beam search with a GNMT length penalty, as in neural machine translation.

Alive and finished hypotheses are kept apart. At every step each alive beam
is extended by every token, and the best `2 * beam_size` candidates are
kept: candidates ending in EOS that rank within the first `beam_size` move to
the finished pool (scored with the length penalty), and the best
`beam_size` candidates not ending in EOS stay alive. As at most `beam_size`
of the `2 * beam_size` candidates end in EOS, finished hypotheses never
starve the alive ones. Counting an EOS candidate only within the first
`beam_size` ranks (as fairseq does) makes `beam_size=1` exactly greedy
decoding when `alpha=0`.

When a sentence is done is the sampler's `stop` rule. `"exact"`: once its
`num_return`-th best finished score is at least the best score any alive
beam could still reach (its log-probability, which can only fall, over the
largest length penalty it could get), so the search returns what it would
return if it ran to the length limit. `"early"`: once the best candidate
of a step (by log-probability) has ended in EOS and `num_return`
hypotheses have finished, as OpenNMT-py and CTranslate2 (without a length
penalty) stop; a longer hypothesis that the length penalty would have
preferred may then go unfound. Either way a sentence is done at its length
limit, where its best alive candidates are finished as they are. With
`length_penalty="huggingface"` (`length ** alpha`) the search is Hugging
Face's `generate(num_beams=...)` (its `early_stopping=False`), whatever the
`stop` rule: a sentence is done once it holds `beam_size` finished
hypotheses and the best alive one, scored at its length so far, is no
better than the worst of them. A sentence once done stays done.
`BeamSampler` is this search as a sampler of the one decoding
loop (`keras_transformer.decoding.loop`), which runs it until every
sentence is done. With terminology constraints it is lexically
constrained beam search (`keras_transformer.decoding.constraints`).
"""

from typing import Any, NamedTuple

import numpy as np
from keras import ops

from keras_transformer.decoding import constraints as lexical
from keras_transformer.decoding.common import (
    NEG_INF,
    check_alpha,
    check_length_penalty,
    gather_rows,
    length_penalty,
    top_k,
    write_column,
)
from keras_transformer.decoding.defaults import ALPHA, BEAM_SIZE, MAX_EXTRA_LENGTH, STOP, STOP_RULES
from keras_transformer.decoding.loop import decode
from keras_transformer.decoding.samplers import Sampler
from keras_transformer.tokens import BOS_ID, EOS_ID
from keras_transformer.validation import check_positive


class BeamState(NamedTuple):
    """Beam search's hypotheses; `length` is the output buffer length."""

    alive_seqs: Any  # (batch, beam, length + 1) int32: BOS, tokens, 0 after
    alive_log_probs: Any  # (batch, beam) float32: sum of log-probs, sorted down
    finished_seqs: Any  # (batch, beam, length + 1) int32: BOS, tokens, EOS, 0
    finished_scores: Any  # (batch, beam) float32: penalised scores, sorted down
    finished_flags: Any  # (batch, beam) bool: slot holds a real hypothesis
    top_ended: Any  # (batch,) bool: a step's best candidate ended (the "early" stop rule)
    stopped: Any  # (batch,) bool: the sentence was done before the last step


class ConstrainedBeamState(NamedTuple):
    """`BeamState` with each sentence's terminology constraints and each
    alive hypothesis's progress through them (`decoding.constraints`)."""

    alive_seqs: Any
    alive_log_probs: Any
    finished_seqs: Any
    finished_scores: Any
    finished_flags: Any
    top_ended: Any
    stopped: Any
    constraints: Any  # (batch, constraints, length) int32: phrases, PAD after
    alive_progress: Any  # (batch, beam, constraints) int32: tokens met of each phrase, its length + 1 once met


def check_stop(stop):
    """Raises `ValueError` unless `stop` names a stop rule (`STOP_RULES`)."""
    if stop not in STOP_RULES:
        raise ValueError(f"Argument `stop` must be one of {STOP_RULES}. Received: stop={stop!r}")
    return stop


def _extended(seqs, beams, tokens, step):
    """`(batch, n, length + 1)`: the rows `beams` `(batch, n)` of `seqs`
    with `tokens` `(batch, n)` written at position `step + 1`."""
    return write_column(gather_rows(seqs, beams), tokens, step + 1)


class BeamSampler(Sampler):
    """Beam search with the GNMT length penalty, a sampler of `decode`.

    Args:
        beam_size: int >= 1.
        alpha: float >= 0. The length penalty's exponent; 0 ranks by the sum
            of log-probabilities (favouring short outputs).
        num_return: int in [1, beam_size]. Hypotheses returned per sentence.
        continues_word: None, or `(vocab,)` bool: the tokens that continue
            the word before them. With terminology constraints, none may
            follow a phrase's last token, so phrases are met as whole words
            (`keras_transformer.decoding.constraints`).
        stop: `"exact"` or `"early"`: when a sentence is done (the module
            docstring).
        length_penalty: `"gnmt"` (the default) or `"huggingface"`, which
            also stops a sentence as Hugging Face's `generate` does (the
            module docstring).
    """

    result_fields = ("finished_seqs", "finished_scores", "finished_flags")
    takes_constraints = True

    def __init__(self, beam_size=BEAM_SIZE, alpha=ALPHA, num_return=1, continues_word=None, stop=STOP,
                 length_penalty="gnmt"):
        check_positive("beam_size", beam_size)
        check_positive("num_return", num_return)
        if num_return > beam_size:
            raise ValueError(
                f"Argument `num_return` must be at most `beam_size`={beam_size}. Received: num_return={num_return}"
            )
        self.beam_size, self.alpha, self.num_return = beam_size, check_alpha(alpha), num_return
        self.width, self.stop = beam_size, check_stop(stop)
        self.length_penalty = check_length_penalty(length_penalty)
        self.continues_word = None if continues_word is None else np.asarray(continues_word, dtype=bool)

    def start(self, source_ids, length, bos_id, limits):
        k, batch = self.beam_size, ops.shape(source_ids)[0]
        seqs = ops.concatenate(
            [ops.full((batch, k, 1), bos_id, dtype="int32"), ops.zeros((batch, k, length), dtype="int32")], axis=2
        )
        first = ops.cast(ops.equal(ops.arange(k), 0), "float32")  # only beam 0 is expanded at the first step
        state = BeamState(
            alive_seqs=seqs,
            alive_log_probs=ops.tile((1.0 - first)[None, :] * NEG_INF, (batch, 1)),
            finished_seqs=ops.zeros_like(seqs),
            finished_scores=ops.full((batch, k), NEG_INF, dtype="float32"),
            finished_flags=ops.zeros((batch, k), dtype="bool"),
            top_ended=ops.zeros((batch,), dtype="bool"),
            stopped=ops.less_equal(limits, 0),
        )
        return state

    def tokens(self, state):
        return state.alive_seqs

    def done(self, state, step, limits):
        """(batch,) bool: the sentence is done under the `stop` rule: its top
        `num_return` can not change ("exact"), or the best candidate of a
        step has ended and `num_return` hypotheses have finished ("early");
        with Hugging Face's length penalty, by its rule; or it reached its
        length limit."""
        n = self.num_return
        if self.length_penalty == "huggingface":
            # The best alive hypothesis scored at its length so far, against
            # the worst of a full beam of finished ones.
            best_now = state.alive_log_probs[:, 0] / length_penalty(ops.maximum(step, 1), self.alpha, "huggingface")
            full = ops.all(state.finished_flags, axis=1)
            going_on = ops.logical_not(ops.logical_and(full, best_now <= state.finished_scores[:, -1]))
        elif self.stop == "early":
            going_on = ops.logical_not(ops.logical_and(state.top_ended, state.finished_flags[:, n - 1]))
        else:
            threshold = ops.where(state.finished_flags[:, n - 1], state.finished_scores[:, n - 1], NEG_INF)
            going_on = state.alive_log_probs[:, 0] / length_penalty(limits, self.alpha) > threshold
        return ops.logical_or(state.stopped, ops.logical_not(ops.logical_and(ops.less(step, limits), going_on)))

    def extend(self, state, log_probs, step, limits, eos_id):
        """One step from `log_probs` `(batch, beam, vocab)`: the new state
        and each new alive hypothesis's parent beam `(batch, beam)`."""
        k, vocab = self.beam_size, log_probs.shape[-1]
        active = ops.expand_dims(ops.logical_not(self.done(state, step, limits)), 1)  # (batch, 1)
        candidates = ops.expand_dims(state.alive_log_probs, 2) + log_probs
        # (batch, 2 * beam): the best extensions over all beams and tokens.
        top_log_probs, top_indices = top_k(ops.reshape(candidates, (-1, k * vocab)), 2 * k)
        top_beams, top_tokens = ops.floor_divide(top_indices, vocab), ops.mod(top_indices, vocab)  # (batch, 2 * beam)
        top_seqs = _extended(state.alive_seqs, top_beams, top_tokens, step)  # (batch, 2 * beam, length + 1)
        is_eos = ops.zeros_like(top_tokens, dtype="bool") if eos_id is None else ops.equal(top_tokens, eos_id)
        real = ops.greater(top_log_probs, NEG_INF)  # not from a dead beam
        finished = self._finished_pool(state, top_log_probs, top_seqs, is_eos, real, active, step, limits)

        # Alive pool: the best `beam` candidates that did not end in EOS.
        alive_candidates = ops.where(is_eos, NEG_INF, ops.maximum(top_log_probs, NEG_INF))
        alive_log_probs, chosen = ops.top_k(alive_candidates, k)  # (batch, beam)
        chosen = ops.cast(chosen, "int32")
        state = BeamState(alive_seqs=gather_rows(top_seqs, chosen), alive_log_probs=alive_log_probs, **finished)
        return state, gather_rows(top_beams, chosen)

    def _finished_pool(self, state, top_log_probs, top_seqs, is_eos, real, active, step, limits):
        """The finished fields after a step whose candidates, best first,
        are `top_log_probs` `(batch, n)` and `top_seqs`: the pool keeps its
        best `beam` of itself and the `real` candidates within the first
        `beam` ranks that end in EOS, or that reach their sentence's length
        limit as they are; and whether the first of them finished."""
        k = self.beam_size
        at_limit = ops.expand_dims(ops.greater_equal(step + 1, limits), 1)  # (batch, 1)
        in_beam = ops.less(ops.arange(top_log_probs.shape[1] or ops.shape(top_log_probs)[1]), k)  # (n,)
        finishing = ops.logical_and(
            ops.logical_and(ops.logical_or(is_eos, at_limit), in_beam), ops.logical_and(active, real)
        )
        new_scores = ops.where(finishing, top_log_probs / length_penalty(step + 1, self.alpha, self.length_penalty),
                               NEG_INF)
        finished_scores, keep = ops.top_k(ops.concatenate([state.finished_scores, new_scores], axis=1), k)
        keep = ops.cast(keep, "int32")  # (batch, beam) of the pool and the candidates, (batch, beam + n)
        return dict(
            finished_seqs=gather_rows(ops.concatenate([state.finished_seqs, top_seqs], axis=1), keep),
            finished_scores=finished_scores,
            finished_flags=gather_rows(ops.concatenate([state.finished_flags, finishing], axis=1), keep),
            # The best candidate (rank 0) finished: what the "early" rule waits
            # for. Kept under either rule: a loop variable passed through
            # unchanged fails TensorFlow's XLA bridge (tests/decoding).
            top_ended=ops.logical_or(state.top_ended, finishing[:, 0]),
            stopped=ops.logical_not(active[:, 0]),  # done before this step: stays done
        )

    def result(self, state):
        # A sentence whose length limit is 0 (an all-padding source with
        # max_extra_length=0) finishes no hypothesis: its best output is
        # empty, with score 0 as in greedy decoding, not the NEG_INF
        # placeholder (nor the tokens of whichever placeholder top_k kept);
        # the rest of its n-best stay NEG_INF placeholders, as for any
        # sentence that finishes fewer than `num_return` hypotheses.
        n = self.num_return
        nothing = ops.logical_not(ops.any(state.finished_flags, axis=1))  # (batch,)
        tokens = ops.where(nothing[:, None, None], 0, state.finished_seqs[:, :n, 1:])  # (batch, n, length)
        first = ops.arange(n)[None, :] == 0  # (1, n)
        scores = ops.where(nothing[:, None] & first, 0.0, state.finished_scores[:, :n])
        return (tokens[:, 0], scores[:, 0]) if n == 1 else (tokens, scores)

    def get_config(self):
        return {"beam_size": self.beam_size, "alpha": self.alpha, "num_return": self.num_return, "stop": self.stop,
                "length_penalty": self.length_penalty}

    def with_constraints(self):
        return ConstrainedBeamSampler(self.beam_size, self.alpha, self.num_return, self.continues_word, self.stop,
                                      self.length_penalty)

    def __repr__(self):
        return (f"{type(self).__name__}(beam_size={self.beam_size}, alpha={self.alpha}, num_return={self.num_return}, "
                f"stop={self.stop!r}, length_penalty={self.length_penalty!r})")


class ConstrainedBeamSampler(BeamSampler):
    """Lexically constrained beam search: `BeamSampler` whose every output
    holds its sentence's terminology constraints, by dynamic beam
    allocation (`keras_transformer.decoding.constraints`). The loop makes it
    of a `BeamSampler` given constraints (`with_constraints`)."""

    def start(self, source_ids, length, bos_id, limits, constraints=None):
        """The first hypotheses of `constraints` `(batch, constraints, phrase_length)`."""
        state = super().start(source_ids, length, bos_id, limits)
        constraints = ops.cast(constraints, "int32")
        return ConstrainedBeamState(*state, constraints, lexical.start_progress(constraints, self.beam_size))

    def extend(self, state, log_probs, step, limits, eos_id):
        """`extend` with terminology constraints: the candidates and the
        alive beams of dynamic beam allocation (`decoding.constraints`)."""
        k, vocab = self.beam_size, log_probs.shape[-1]
        lengths = lexical.phrase_lengths(state.constraints)  # (batch, constraints)
        log_probs = lexical.allowed_log_probs(log_probs, state.alive_progress, state.constraints, lengths, step,
                                              limits, eos_id, self.continues_word)
        active = ops.logical_not(self.done(state, step, limits))[:, None]  # (batch, 1)
        indices, total, real = lexical.candidate_indices(
            log_probs, state.alive_log_probs, state.alive_progress, state.constraints, lengths, k)  # (batch, m)
        candidate_log_probs = ops.take_along_axis(total, indices, axis=1)
        valid = lexical.first_occurrences(indices, real) & ops.greater(candidate_log_probs, NEG_INF)
        # Best first, the invalid ones last.
        m = ops.shape(indices)[1]
        top_log_probs, order = ops.top_k(ops.where(valid, candidate_log_probs, 2 * NEG_INF), m)
        indices, valid = ops.take_along_axis(indices, ops.cast(order, "int32"), axis=1), top_log_probs > NEG_INF
        top_beams, top_tokens = ops.floor_divide(indices, vocab), ops.mod(indices, vocab)  # (batch, m)
        top_seqs = _extended(state.alive_seqs, top_beams, top_tokens, step)  # (batch, m, length + 1)
        progress = lexical.advance(gather_rows(state.alive_progress, top_beams), state.constraints, lengths, top_tokens,
                                   self.continues_word is not None)
        is_eos = ops.zeros_like(top_tokens, dtype="bool") if eos_id is None else ops.equal(top_tokens, eos_id)
        finished = self._finished_pool(state, top_log_probs, top_seqs, is_eos, valid, active, step, limits)

        # Alive pool: dynamic beam allocation over the banks, then best first.
        eligible = valid & ops.logical_not(is_eos)
        span = ops.shape(state.constraints)[1] * ops.shape(state.constraints)[2] + 1  # more than any bank
        chosen = lexical.allocate(lexical.banks(progress, lengths), ops.sum(lengths, axis=1), eligible, k, span)
        alive_log_probs = ops.take_along_axis(ops.where(eligible, top_log_probs, NEG_INF), chosen, axis=1)
        alive_log_probs, best_first = ops.top_k(alive_log_probs, k)
        chosen = ops.take_along_axis(chosen, ops.cast(best_first, "int32"), axis=1)
        state = ConstrainedBeamState(
            alive_seqs=gather_rows(top_seqs, chosen), alive_log_probs=alive_log_probs, **finished,
            constraints=state.constraints, alive_progress=gather_rows(progress, chosen),
        )
        return state, gather_rows(top_beams, chosen)

    def with_constraints(self):
        return self


def beam_search(
    model,
    source_ids,
    beam_size=BEAM_SIZE,
    alpha=ALPHA,
    max_length=None,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    num_return=1,
    use_cache=True,
    max_extra_length=MAX_EXTRA_LENGTH,
    narrow_batches=False,
    stop=STOP,
    length_penalty="gnmt",
):
    """Beam search decoding of a batch of source sentences.

    `decode` with a `BeamSampler`: it runs eagerly, under
    `tf.function(jit_compile=True)`, `jax.jit` and on PyTorch, and exports
    with stock TensorFlow ops.

    Args:
        model: a `Transformer`, or any object with `encode`, `init_cache`
            and `decode` of the same signatures.
        source_ids: int `(batch, source_length)`, padded with 0; sentences
            may have different lengths.
        beam_size: int >= 1.
        alpha: float >= 0. Length penalty exponent; 0 ranks by the sum of
            log-probabilities (favouring short outputs).
        max_length: int, number of output tokens. `None`: each sentence may
            produce its source length (without padding) + `max_extra_length`
            tokens, capped by the model's `max_length`.
        bos_id: int. First decoder input.
        eos_id: int or `None`. `None` never finishes a hypothesis early
            (fixed output length, for benchmarks).
        num_return: int in [1, beam_size]. Hypotheses returned per sentence.
        use_cache: bool. Decode with the key/value cache (reordered with
            the beams), or re-run the full decoder every step.
        max_extra_length: int, see `max_length`.
        narrow_batches: `False`, `True` or `"halves"`: what becomes of the
            sentences that are done (`keras_transformer.decoding.loop`);
            the outputs are those of `False`.
        stop: `"exact"` or `"early"`: when a sentence is done (`BeamSampler`).
        length_penalty: `"gnmt"` or `"huggingface"` (`BeamSampler`).

    Returns:
        `(tokens, scores)`. With `num_return=1`: int32 `(batch, length)`,
        the best hypothesis without BOS, EOS included, 0 after EOS; and
        float32 `(batch,)`, its log-probability divided by the length
        penalty. With `num_return > 1`: `(batch, num_return, length)` and
        `(batch, num_return)`, best first; a sentence with fewer finished
        hypotheses fills the rest with placeholders scored `NEG_INF`.

    Example:

    >>> model = Transformer.from_architecture("tiny", vocab_size=100)
    >>> tokens, scores = beam_search(model, [[5, 6, 7, 3]], max_length=8)
    >>> tokens.shape
    (1, 8)
    """
    sampler = BeamSampler(beam_size, alpha, num_return, stop=stop, length_penalty=length_penalty)
    return decode(model, source_ids, sampler, max_length, bos_id, eos_id, use_cache, max_extra_length, narrow_batches)
