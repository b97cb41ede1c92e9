"""Lexically constrained beam search with dynamic beam allocation.

Terminology constraints are target phrases, each a sequence of token ids,
that must all appear in a translation (Post and Vilar, 2018, "Fast
Lexically Constrained Decoding with Dynamic Beam Allocation"; Hu et al.,
2019, vectorized it). A hypothesis counts, for each phrase, its tokens met
so far (`progress`); its *bank* is the sum of those counts.

At each step the candidates are the usual best `2 * beam` extensions, each
beam's best token, and each beam extended by the next token of each of its
phrases not yet complete; duplicates are dropped. The alive beams are then
filled bank by bank in turns, best score first within a bank, the fullest
bank first in each turn (`allocate`), so hypotheses that hold more of their
phrases keep a place beside those the model prefers, and a bank without
candidates leaves its places to the others.

Before that, `allowed_log_probs` rules out tokens:
- EOS, until a hypothesis holds every phrase, so every finished hypothesis
  holds them all;
- every token but a begun phrase's next one (`continue_phrases`): partial
  phrases raise a hypothesis's bank, and without this rule the beams filled
  with hypotheses that began a long phrase again and again and never
  finished it;
- every token but the next one of a phrase not yet complete, where the
  phrases need as many tokens as the sentence has left before its length
  limit (`meet_in_time`), so every phrase that fits is met: a weak model
  otherwise ran some sentences to their limit without placing a phrase;
- with `continues_word` (`BeamSampler(continues_word=...)`, which the
  `Translator` sets from its tokenizer), a token that continues a word
  right after a phrase's last token (`end_words`), so phrases are met as
  whole words: "soir" is not met inside "soirée".

A phrase's progress then runs to its length (complete, waiting for the next
token) and one past it (met, for good); without `continues_word` it goes
from one short of its length straight to met. Where the next token breaks a
phrase, its progress restarts: at 1 when the token is its first, else at 0
(no failure function as in Knuth-Morris-Pratt).

Constraints are an int array `(batch, constraints, length)` padded with
PAD (0); a row of PAD is no constraint, and a sentence without any
translates as it would without constraints.
"""

from keras import ops

from keras_transformer.decoding.common import NEG_INF
from keras_transformer.tokens import PAD_ID


def phrase_lengths(constraints):
    """(batch, constraints) int32: the tokens of each phrase."""
    return ops.sum(ops.cast(ops.not_equal(constraints, PAD_ID), "int32"), axis=2)


def start_progress(constraints, beam):
    """(batch, beam, constraints) int32: no token met yet; a phrase of no
    tokens (padding) is met from the start."""
    empty = ops.cast(ops.equal(phrase_lengths(constraints), 0), "int32")  # (batch, constraints)
    return ops.repeat(empty[:, None, :], beam, axis=1)


def is_met(progress, lengths):
    """(batch, n) bool: whether hypotheses with `progress` `(batch, n,
    constraints)` hold every phrase of `lengths` `(batch, constraints)`
    (met, or complete and waiting for the token after it), and so may end."""
    return ops.all(ops.greater_equal(progress, lengths[:, None, :]), axis=2)


def banks(progress, lengths):
    """(batch, n) int32: the phrase tokens each hypothesis holds."""
    return ops.sum(ops.minimum(progress, lengths[:, None, :]), axis=2)


def wanted_tokens(progress, constraints):
    """(batch, n, constraints) int32: the token that takes each phrase one
    step further, for hypotheses with `progress` `(batch, n, constraints)`."""
    length = ops.shape(constraints)[2]
    position = ops.minimum(progress, length - 1)  # (batch, n, constraints)
    phrases = ops.repeat(constraints[:, None], ops.shape(progress)[1], axis=1)  # (batch, n, constraints, length)
    return ops.take_along_axis(phrases, position[..., None], axis=3)[..., 0]


def advance(progress, constraints, lengths, tokens, whole_words):
    """The progress `(batch, n, constraints)` of hypotheses with `progress`
    once extended by `tokens` `(batch, n)`. A phrase not yet complete goes
    one token further when the token is its next one, starts again at 1
    when it is its first, and at 0 otherwise. A complete phrase is met
    (one past its length) at the next token, with `whole_words` (a Python
    bool); at once without."""
    token = tokens[:, :, None]  # (batch, n, 1)
    first = constraints[:, None, :, 0]  # (batch, 1, constraints)
    length = lengths[:, None, :]
    moved = ops.where(
        ops.equal(wanted_tokens(progress, constraints), token), progress + 1,
        ops.cast(ops.equal(first, token), "int32"),
    )
    if not whole_words:
        moved = ops.where(ops.equal(moved, length), length + 1, moved)
    return ops.where(ops.greater_equal(progress, length), length + 1, moved)


def next_tokens_only(log_probs, progress, constraints, phrases):
    """`log_probs` `(batch, beam, vocab)` with `NEG_INF` for every token but
    the next one of the `phrases` `(batch, beam, constraints)` bool that
    a hypothesis names; hypotheses that name none are left as they are."""
    vocab = log_probs.shape[-1]
    next_tokens = ops.where(phrases, wanted_tokens(progress, constraints), -1)
    # (batch, beam, vocab): the token is one of the named phrases' next ones.
    allowed = ops.any(ops.equal(ops.arange(vocab, dtype="int32"), next_tokens[..., None]), axis=2)
    named = ops.any(phrases, axis=2)[:, :, None]
    return ops.where(ops.logical_and(named, ops.logical_not(allowed)), NEG_INF, log_probs)


def continue_phrases(log_probs, progress, constraints, lengths):
    """`log_probs` where a hypothesis has begun a phrase and not completed
    it: only that phrase's next token."""
    begun = ops.logical_and(ops.greater(progress, 0), ops.less(progress, lengths[:, None, :]))
    return next_tokens_only(log_probs, progress, constraints, begun)


def meet_in_time(log_probs, progress, constraints, lengths, step, limits):
    """`log_probs` where a hypothesis has no more tokens left before its
    sentence's length limit `(batch,)` than its phrases still need: only the
    next token of a phrase not yet complete, so every phrase that fits is
    met by the limit, where a sentence's search ends."""
    length = lengths[:, None, :]
    needed = ops.sum(ops.maximum(length - progress, 0), axis=2)  # (batch, beam)
    late = ops.less_equal(limits[:, None] - step, needed)  # tokens left, this one included
    return next_tokens_only(log_probs, progress, constraints, ops.less(progress, length) & late[:, :, None])


def end_words(log_probs, progress, lengths, continues_word):
    """`log_probs` `(batch, beam, vocab)` with `NEG_INF` for the tokens that
    continue a word (`continues_word`, `(vocab,)` bool) where a hypothesis
    has just completed a phrase."""
    complete = ops.any(ops.equal(progress, lengths[:, None, :]) & ops.greater(lengths[:, None, :], 0), axis=2)
    continues = ops.convert_to_tensor(continues_word)[None, None, :]
    return ops.where(ops.logical_and(complete[:, :, None], continues), NEG_INF, log_probs)


def allowed_log_probs(log_probs, progress, constraints, lengths, step, limits, eos_id, continues_word):
    """`log_probs` `(batch, beam, vocab)` with `NEG_INF` for the tokens that
    the rules above rule out: EOS before every phrase is held, a begun
    phrase's breaking off, a phrase's missing its sentence's limit and,
    given `continues_word`, a word going on after a complete phrase."""
    if eos_id is not None:
        unmet = ops.logical_not(is_met(progress, lengths))  # (batch, beam)
        is_eos = ops.equal(ops.arange(log_probs.shape[-1]), eos_id)[None, None, :]
        log_probs = ops.where(unmet[:, :, None] & is_eos, NEG_INF, log_probs)
    log_probs = continue_phrases(log_probs, progress, constraints, lengths)
    log_probs = meet_in_time(log_probs, progress, constraints, lengths, step, limits)
    if continues_word is not None:
        log_probs = end_words(log_probs, progress, lengths, continues_word)
    return log_probs


def candidate_indices(log_probs, alive_log_probs, progress, constraints, lengths, beam):
    """The candidates of a step, as indices into the flat `(batch, beam *
    vocab)` extensions: the best `2 * beam`, then each beam's best token,
    then each beam extended by the wanted token of each phrase it has not
    completed; `(indices, extensions, real)`: `(batch, 2 * beam + beam +
    beam * constraints)` int32, the extensions' scores `(batch, beam *
    vocab)`, and `(batch, 2 * beam + beam + beam * constraints)` bool, False
    for the wanted token of a phrase already complete (it is none)."""
    batch, vocab = ops.shape(log_probs)[0], log_probs.shape[-1]
    offsets = ops.arange(beam, dtype="int32")[None, :] * vocab  # (1, beam)
    total = ops.reshape(alive_log_probs[:, :, None] + log_probs, (batch, beam * vocab))
    top = ops.cast(ops.top_k(total, 2 * beam)[1], "int32")
    best = ops.cast(ops.argmax(log_probs, axis=2), "int32") + offsets  # (batch, beam)
    wanted = wanted_tokens(progress, constraints) + offsets[:, :, None]  # (batch, beam, constraints)
    open_phrase = ops.reshape(ops.less(progress, lengths[:, None, :]), (batch, -1))
    indices = ops.concatenate([top, best, ops.reshape(wanted, (batch, -1))], axis=1)
    real = ops.concatenate([ops.ones_like(top, dtype="bool"), ops.ones_like(best, dtype="bool"), open_phrase], axis=1)
    return indices, total, real


def first_occurrences(indices, real):
    """(batch, m) bool: the `real` candidates of `indices` `(batch, m)` that
    no earlier real candidate repeats."""
    m = ops.shape(indices)[1]
    same = ops.equal(indices[:, :, None], indices[:, None, :])  # (batch, m, m)
    earlier = ops.less(ops.arange(m)[None, :], ops.arange(m)[:, None])[None]  # (1, m, m): j < i
    repeated = ops.any(same & earlier & real[:, None, :], axis=2)
    return ops.logical_and(real, ops.logical_not(repeated))


def allocate(banks, totals, eligible, beam, span):
    """The `beam` candidates kept alive, `(batch, beam)` int32 positions
    into candidates sorted by score (best first): turn by turn, the best
    eligible candidate of each bank not yet exhausted, fuller banks first.

    `banks` `(batch, m)` int32, `totals` `(batch,)` int32 (the fullest bank),
    `eligible` `(batch, m)` bool; `span` is more than any bank."""
    m = ops.shape(banks)[1]
    same = ops.equal(banks[:, :, None], banks[:, None, :])  # (batch, m, m)
    earlier = ops.less(ops.arange(m)[None, :], ops.arange(m)[:, None])[None]
    rank = ops.sum(ops.cast(same & earlier & eligible[:, None, :], "int32"), axis=2)  # (batch, m): within its bank
    order = rank * span + (totals[:, None] - banks)  # smaller first
    order = ops.where(eligible, order, span * (m + 1))
    return ops.cast(ops.top_k(-order, beam)[1], "int32")
