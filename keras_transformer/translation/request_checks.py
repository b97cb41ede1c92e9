"""What a translation request may ask, checked once for every path that takes one.

The `Translator` (and so the command line), the SavedModel's predictor
(`keras_transformer.serving.predictor`, behind the REST API) and the
exported graph read these rules here, so a request refused by one is
refused by the others, for the same reason. The graph runs them as
TensorFlow ops (`check_steering_graph`), because TF Serving calls its
signatures directly:

- **Texts** are lists (or tuples) of strings; steering (`target_prefix`,
  `constraints`) gives one entry per sentence (`STEERING_FIELDS`, where a
  new per-sentence field is added).
- **`n_best`** is at most the beam size, and 1 when sampling.
- **Constraints** need beam search: a beam of at least 2, no sampling.
- **The vocabulary.** A target prefix or constraint is forced into the
  translation piece by piece, so each of its pieces must be in the model's
  vocabulary: one that the tokenizer can only turn into its unknown piece
  (`UNK_ID`) would come out as "⁇", and is refused.
- **The room a request has.** A sentence's prefix and constraints steer
  its first piece (`keras_transformer.translation.preprocessor`: a long input is split
  first). The prefix, then the prefix and the constraints together, must be
  shorter than that piece's output limit (`steering_room`).
- **Scoring** takes texts of at most the model's length on either side
  (`scoring_limits`; in the graph, `check_score_graph`).
- **Token ids** are integers in `[0, vocab_size)`.
"""

import numbers

import numpy as np
from keras import ops

from keras_transformer.decoding.common import output_limit
from keras_transformer.decoding.scoring import scoring_limits
from keras_transformer.tokens import PAD_ID, UNK_ID
from keras_transformer.translation.preprocessor import first_pieces, first_pieces_graph
from keras_transformer.validation import check_phrases, check_positive

__all__ = ["scoring_limits"]

# What an unknown piece comes out as (SentencePiece's rendering of UNK_ID).
UNKNOWN_TEXT = "\u2047"


def _shown(value, most=80):
    """`repr(value)`, cut to `most` characters: a request may hold long texts."""
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def check_strings(name, texts):
    """Raises `ValueError` unless `texts` is a list (or tuple, or array) of
    strings, naming the first entry that is not one, its index and type."""
    if isinstance(texts, (str, bytes)) or not (hasattr(texts, "__len__") and hasattr(texts, "__getitem__")):
        kind = type(texts).__name__
        received = f"a {kind}: make it a list" if hasattr(texts, "__iter__") and not isinstance(texts, (str, bytes)) \
            else f"{name}={_shown(texts)}"
        raise ValueError(f"Argument `{name}` must be a list of strings. Received: {received}")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"Argument `{name}` must be a list of strings. Received: {name}[{index}]={_shown(text)} "
                             f"of type {type(text).__name__}")


def check_phrase_lists(name, lists):
    """`constraints`: one list of phrases per sentence (`check_phrases`)."""
    if isinstance(lists, str) or not all(isinstance(p, (list, tuple)) for p in lists):
        raise ValueError(f"Argument `{name}` must be a list of lists of strings, one list per sentence. Received: "
                         f"{type(lists).__name__} of {sorted({type(p).__name__ for p in lists})}")
    for index, phrases in enumerate(lists):
        check_phrases(f"{name}[{index}]", phrases)


# The per-sentence fields that steer a translation, each with the check of
# its value: one entry per sentence, in the order of the sentences.
STEERING_FIELDS = {"target_prefix": check_strings, "constraints": check_phrase_lists}


def per_sentence(name, values, count, check):
    """`values` (one per sentence) checked by `check`, as a list, or None."""
    if values is None:
        return None
    if not hasattr(values, "__len__"):
        raise ValueError(f"Argument `{name}` must be a list, one entry per sentence. Received: {type(values).__name__}")
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
    prefixes = per_sentence("target_prefix", target_prefix, count, STEERING_FIELDS["target_prefix"])
    phrases = per_sentence("constraints", constraints, count, STEERING_FIELDS["constraints"])
    if phrases and any(phrases) and not sampler.takes_constraints:
        check_constraints_searchable(beam_size, sampler)
    return prefixes, phrases


def _label(labels, index):
    """How an error names sentence `index`: `labels[index]`, or `sentence <index>`."""
    return f"sentence {index}" if labels is None else labels[index]


def check_in_vocabulary(name, label, text, ids):
    """Raises `ValueError` if `text`, the `name` of `label`, has a piece
    outside the vocabulary: its `ids` hold `UNK_ID`."""
    if UNK_ID in ids:
        raise ValueError(f"Argument `{name}` of {label} has a piece outside the vocabulary of the model, which "
                         f"would come out as {UNKNOWN_TEXT}: it cannot be forced into a translation. Leave it out, "
                         f"or write it in characters of the vocabulary. Received: {_shown(text)}")


def sentence_steering(tokenizer, prefixes, phrases, count, labels=None):
    """Each of `count` sentences' `(prefix ids, [phrase ids])`, tokenized
    by `tokenizer`; `prefixes` and `phrases` as `check_steering` returns
    them. Raises `ValueError` for a piece outside the vocabulary
    (`check_in_vocabulary`); `labels` name the sentences (`_label`)."""
    prefix_ids = tokenizer.encode_target(list(prefixes)) if prefixes is not None else [[]] * count
    phrase_ids = ([tokenizer.encode_target(list(p)) if p else [] for p in phrases] if phrases is not None
                  else [[]] * count)
    for i in range(count):
        if prefixes is not None:
            check_in_vocabulary("target_prefix", _label(labels, i), prefixes[i], prefix_ids[i])
        for j, (text, ids) in enumerate(zip(phrases[i] if phrases else [], phrase_ids[i])):
            check_in_vocabulary("constraints", f"{_label(labels, i)} (phrase {j})", text, ids)
    return list(zip(prefix_ids, phrase_ids))


def piece_steering(steering, pieces, owners, max_extra_length, max_length, prefixes=None, phrases=None, labels=None):
    """Each piece's `(prefix ids, [phrase ids])`: its sentence's
    `steering` (`sentence_steering`) for the sentence's first piece, none
    for the others. Raises `ValueError` unless each first piece has room
    for its steering (`check_piece_room`); `prefixes` and `phrases`, the
    sentences' as given, are shown in the error, `labels` name them."""
    found = []
    for piece, owner, first in zip(pieces, owners, first_pieces(owners)):
        prefix, phrase_ids = steering[owner] if first else ([], [])
        given = [None if values is None else values[owner] for values in (prefixes, phrases)]
        check_piece_room(len(prefix), sum(map(len, phrase_ids)), len(piece), max_extra_length, max_length,
                         _label(labels, owner), *given)
        found.append((prefix, phrase_ids))
    return found


def check_piece_room(prefix, phrases, length, max_extra_length, max_length, label, given_prefix=None,
                     given_phrases=None):
    """Raises `ValueError` unless a piece of `length` tokens, the first of
    the sentence `label`, has room for a target prefix of `prefix` tokens,
    then for it and constraints of `phrases` tokens (`steering_room`); the
    error names `target_prefix` or `constraints`, and shows them."""
    room = steering_room(length, max_extra_length, max_length)
    for name, forced in (("target_prefix", prefix), ("constraints", prefix + phrases)):
        if not leaves_room(forced, room):
            raise ValueError(
                f"Argument `{name}` of {label} forces {forced} tokens (prefix and constraints); its translation "
                f"may have at most {room} (the output limit of the sentence's first piece, of {length} source "
                f"tokens), so they must be shorter. Received: target_prefix={_shown(given_prefix)}, "
                f"constraints={_shown(given_phrases)}")


def steering_room(source_length, max_extra_length, max_length):
    """The room a piece of `source_length` tokens (EOS included) has for
    its steering: its output limit (`output_limit`)."""
    return output_limit(source_length, max_extra_length, max_length)


def leaves_room(forced, room):
    """Whether a prefix and constraints of `forced` tokens leave room in an
    output of at most `room` tokens (`steering_room`): they must be shorter."""
    return forced < room


def check_steering_graph(prefix_texts, prefix_ids, phrase_texts, phrase_ids, lengths, owners, count,
                         max_extra_length, max_length):
    """`sentence_steering`'s and `piece_steering`'s checks in TensorFlow
    ops, for the SavedModel's graph: assertions that fail the call with an
    `InvalidArgumentError` naming `target_prefix` or `constraints`.

    Args:
        prefix_texts, prefix_ids: each sentence's target prefix `(count,)`
            string and its ids, ragged `(count, None)`.
        phrase_texts, phrase_ids: the constraints `(count, constraints)`
            string (`""`: none) and their ids, ragged `(count * constraints, None)`.
        lengths: each piece's source length, EOS included `(pieces,)`.
        owners: each piece's sentence `(pieces,)`; `count` sentences.

    Returns:
        The assertion ops, for control dependencies.
    """
    import tensorflow as tf  # the graph face only

    # The messages hold no quotes: a failed assertion's error escapes them.
    assertions = []
    for name, texts, ids in (("target_prefix", prefix_texts, prefix_ids),
                             ("constraints", tf.reshape(phrase_texts, [-1]), phrase_ids)):
        unknown = tf.reduce_any(tf.equal(ids, UNK_ID), axis=1)  # (texts,)
        at = tf.argmax(tf.cast(unknown, tf.int32), output_type=tf.int32)
        assertions.append(tf.debugging.Assert(tf.logical_not(tf.reduce_any(unknown)), [
            f"Argument `{name}` has a piece outside the vocabulary of the model, which would come out as "
            f"{UNKNOWN_TEXT}: it cannot be forced into a translation. The first such text, and its index "
            f"(of the {name} flattened):", tf.gather(texts, at), at]))
    first, _ = first_pieces_graph(owners, count)  # (pieces,)
    room = tf.minimum(tf.cast(lengths, tf.int32) + max_extra_length, max_length)  # output_limit, (pieces,)
    phrase_lengths = tf.reshape(tf.cast(phrase_ids.row_lengths(), tf.int32), tf.shape(phrase_texts))  # (count, constraints)
    prefix = tf.where(first, tf.gather(tf.cast(prefix_ids.row_lengths(), tf.int32), owners), 0)  # (pieces,)
    phrases = tf.where(first, tf.gather(tf.reduce_sum(phrase_lengths, axis=1), owners), 0)
    for name, forced in (("target_prefix", prefix), ("constraints", prefix + phrases)):
        short = forced < room  # leaves_room
        at = tf.argmin(tf.cast(short, tf.int32), output_type=tf.int32)
        assertions.append(tf.debugging.Assert(tf.reduce_all(short), [
            f"Argument `{name}` forces more tokens (prefix and constraints) than the translation of a sentence "
            "may have (the output limit of its first piece), so they must be shorter. The sentence, the tokens "
            "it forces, its output limit:", tf.gather(owners, at), tf.gather(forced, at), tf.gather(room, at)]))
    return assertions


def check_score_length(name, length, most, received, where="", counted=""):
    """Raises `ValueError` for a side to score of `length` tokens over the
    `most` the model scores (`scoring_limits`); `where` names the row,
    `counted` says what the count holds."""
    if length > most:
        raise ValueError(f"Argument `{name}`{where} has {length} tokens{counted}; the model scores at most {most}. "
                         f"Received: {received}")


def check_score_pairs(sources, targets, max_length, names=("source_ids", "target_ids"), texts=None, labels=None):
    """Raises `ValueError` unless the ids of `sources` and `targets` (packed,
    EOS last) are as many and each side fits the model (`scoring_limits`);
    the errors name the arguments `names` and the row (by `labels`, if
    given), and show `texts`, the two sides as given, if any."""
    if len(sources) != len(targets):
        raise ValueError(f"Arguments `{names[0]}` and `{names[1]}` must have the same length. "
                         f"Received: {len(sources)} and {len(targets)} rows")
    for side, (name, rows, most) in enumerate(zip(names, (sources, targets), scoring_limits(max_length))):
        for index, row in enumerate(rows):
            received = f"{len(row)} tokens" if texts is None else _shown(texts[side][index])
            check_score_length(name, len(row), most, received,
                               where=f" row {index}" if labels is None else f" of {labels[index]}",
                               counted="" if texts is None else " with its EOS")


def check_score_graph(source, target, max_length):
    """`check_score_pairs` in TensorFlow ops, for the SavedModel's `score`
    signature: assertions that each side's packed ids, ragged `(batch,
    None)`, fit a model of `max_length` (`scoring_limits`)."""
    import tensorflow as tf  # the graph face only

    return [tf.debugging.assert_less_equal(
        tf.cast(tf.reduce_max(ids.row_lengths()), tf.int32), most,
        message=f"Argument `{name}` has a text over the length of the model: it scores at most {most} tokens, "
                "the EOS included") for name, ids, most in zip(("inputs", "targets"), (source, target),
                                                             scoring_limits(max_length))]


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
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise ValueError(f"Argument `{name}` must be a list of lists of ints. Received: {_shown(rows)}")
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
