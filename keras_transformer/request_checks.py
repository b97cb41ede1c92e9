"""What a translation request may ask, checked once for every path that takes one.

The `Translator`, the SavedModel export and the SavedModel's predictor
(`keras_transformer.serving.predictor`) read these checks here, so a
request refused by one is refused by the others, with the same reason:

- **Texts** are lists of strings; steering (`target_prefix`,
  `constraints`) gives one entry per sentence.
- **`n_best`** is at most the beam size, and 1 when sampling.
- **Constraints** need beam search: a beam of at least 2, no sampling.
- **The room a request has.** A sentence's prefix and constraints steer
  its first piece (`keras_transformer.preprocessor`), and together they
  must be shorter than that piece's output limit (`steering_room`).
- **Scoring** takes texts of at most the model's length on either side
  (`scoring_limits`).
- **Token ids** are integers in `[0, vocab_size)`.
"""

import numbers

import numpy as np
from keras import ops

from keras_transformer.decoding.common import output_limit
from keras_transformer.decoding.scoring import scoring_limits
from keras_transformer.preprocessor import source_budget
from keras_transformer.tokens import PAD_ID
from keras_transformer.validation import check_phrases, check_positive

__all__ = ["scoring_limits"]


def check_strings(name, texts):
    """Raises `ValueError` unless `texts` is a list of strings, naming the
    first entry that is not one."""
    if isinstance(texts, (str, bytes)) or not hasattr(texts, "__iter__"):
        raise ValueError(f"Argument `{name}` must be a list of strings. Received: {type(texts).__name__}")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"Argument `{name}` must be a list of strings. Received: {name}[{index}] of type "
                             f"{type(text).__name__}: {text!r:.80}")


def check_phrase_lists(name, lists):
    """`constraints`: one list of phrases per sentence (`check_phrases`)."""
    if isinstance(lists, str) or not all(isinstance(p, (list, tuple)) for p in lists):
        raise ValueError(f"Argument `{name}` must be a list of lists of strings, one list per sentence. Received: "
                         f"{type(lists).__name__} of {sorted({type(p).__name__ for p in lists})}")
    for index, phrases in enumerate(lists):
        check_phrases(f"{name}[{index}]", phrases)


def per_sentence(name, values, count, check):
    """`values` (one per sentence) checked by `check`, as a list, or None."""
    if values is None:
        return None
    check(name, values)
    if len(values) != count:
        raise ValueError(f"Argument `{name}` must hold one entry per sentence. Received: "
                         f"{len(values)} entries for {count} sentences")
    return list(values)


def check_n_best(n_best, beam_size=None, sampling=False):
    """`n_best` hypotheses a sentence: at most `beam_size` (if known), 1 when sampling."""
    check_positive("n_best", n_best)
    if sampling and n_best != 1:
        raise ValueError(f"Sampling returns one translation a sentence: `n_best` must be 1. Received: n_best={n_best}")
    if beam_size is not None and n_best > beam_size:
        raise ValueError(f"Argument `n_best` must be at most `beam_size`={beam_size}. Received: n_best={n_best}")


def check_constraints_searchable(beam_size, sampler=None):
    """Constraints need beam search: a beam of at least 2 and no sampling."""
    if beam_size < 2 or sampler is not None:
        raise ValueError("Argument `constraints` needs beam search: a translator with beam_size >= 2, and no "
                         f"sampling. Received: beam_size={beam_size}, sampler={sampler!r}")


def check_steering(target_prefix, constraints, count, beam_size, sampler):
    """`(prefixes, phrases)` of a call's steering, checked: one entry per
    sentence (or None), and constraints only with beam search (`sampler`,
    the call's, must take them)."""
    prefixes = per_sentence("target_prefix", target_prefix, count, check_strings)
    phrases = per_sentence("constraints", constraints, count, check_phrase_lists)
    if phrases and any(phrases) and not sampler.takes_constraints:
        check_constraints_searchable(beam_size, sampler)
    return prefixes, phrases


def check_piece_room(steering, length, max_extra_length, max_length, sentence, prefix, phrases):
    """Raises `ValueError` unless a piece of `length` tokens, the first of
    `sentence`, has room for its `steering` (`steering_room`); `prefix` and
    `phrases` are the sentence's, as given."""
    forced = len(steering.prefix) + sum(map(len, steering.constraints))
    room = steering_room(length, max_extra_length, max_length)
    if not leaves_room(forced, room):
        name = "constraints" if steering.constraints else "target_prefix"
        raise ValueError(f"Argument `{name}` of sentence {sentence} forces {forced} tokens (prefix and constraints); "
                         f"its translation may have at most {room}, so they must be shorter. Received: "
                         f"target_prefix={prefix!r}, constraints={phrases!r}")


def steering_room(source_length, max_extra_length, max_length):
    """The room a request's steering has: the output limit of its first
    piece of `source_length` tokens (EOS included). A text over the source
    budget is split, so its first piece holds at most the budget."""
    first_piece = min(source_length, source_budget(max_length, max_extra_length))
    return output_limit(first_piece, max_extra_length, max_length)


def leaves_room(forced, room):
    """Whether a prefix and constraints of `forced` tokens leave room in an
    output of at most `room` tokens (`steering_room`): they must be shorter."""
    return forced < room


def check_score_length(name, length, most, received, where="", counted=""):
    """Raises `ValueError` for a side to score of `length` tokens over the
    `most` the model scores (`scoring_limits`); `where` names the row,
    `counted` says what the count holds."""
    if length > most:
        raise ValueError(f"Argument `{name}`{where} has {length} tokens{counted}; the model scores at most {most}. "
                         f"Received: {received}")


def _is_token(value):
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_token_ids(name, rows, vocab_size=None):
    """Model-ready ids (lists of ints, or an int array `(batch, length)`
    padded with 0) as lists of ints without padding."""
    if isinstance(rows, np.ndarray) or hasattr(rows, "shape"):
        array = rows if isinstance(rows, np.ndarray) else np.asarray(ops.convert_to_numpy(rows))
        if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"Argument `{name}` must be an int array (batch, length) or a list of lists of ints. "
                             f"Received: shape={array.shape}, dtype={array.dtype}")
        rows = array.tolist()
    if isinstance(rows, (str, bytes)):
        raise ValueError(f"Argument `{name}` must be a list of lists of ints. Received: {rows!r}")
    checked = []
    for row in rows:
        if isinstance(row, (str, bytes)) or not hasattr(row, "__iter__"):
            raise ValueError(f"Argument `{name}` must be a list of lists of ints. Received a row: {row!r}")
        row = list(row)
        for token in row:
            if not _is_token(token) or token < 0 or (vocab_size is not None and token >= vocab_size):
                raise ValueError(f"Argument `{name}` must hold integer token ids in [0, {vocab_size}). "
                                 f"Received: {token!r}")
        checked.append([int(t) for t in row if t != PAD_ID])
    return checked
