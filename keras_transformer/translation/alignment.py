"""Word alignments from cross-attention, in Pharaoh format.

A translation's alignment links each of its whitespace words to the source
word it attends to most: the cross-attention of one decoder layer, the mean
of its heads, at the step that predicts each of its subword pieces
(`keras_transformer.decoding.scoring.force_decode`), summed over the pieces
of each word. Pharaoh format writes the links as `source-target` pairs of
0-based word indices: `"0-0 1-2 2-1"`.

`word_links` is `keras.ops` only: the `Translator` runs it on every
backend and the SavedModel in its graph. A piece starts a word if
SentencePiece marks it with "▁" (`piece_kinds`); the bare "▁" piece is a
space of its own, in no word, and the piece after it starts one, so that
the words are those the text splits into.
"""

import numpy as np
from keras import ops

from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID

WORD_START = "\u2581"  # SentencePiece's mark of a piece that starts a word


# `piece_kinds` values: what a piece is to the words of a text.
CONTINUES, STARTS, SPACE = 0, 1, 2


def piece_kinds(tokenizer):
    """(vocab,) int32: `STARTS` for the pieces that start a word, `SPACE`
    for the bare "▁" (a space in no word: a model may put it before a piece
    that starts a word, and the text then holds two spaces), `CONTINUES`
    for the others. A tokenizer whose sides have vocabularies of their own
    (an imported model's) gets a pair, `(source kinds, target kinds)`."""
    target = _kinds(tokenizer.id_to_piece(range(getattr(tokenizer, "target_vocab_size", tokenizer.vocab_size))))
    if getattr(tokenizer, "shared", True):
        return target
    return _kinds(tokenizer.source_id_to_piece(range(tokenizer.vocab_size))), target


def _kinds(pieces):
    return np.array([SPACE if piece == WORD_START else STARTS if piece.startswith(WORD_START) else CONTINUES
                     for piece in pieces], dtype="int32")


def word_numbers(ids, kinds):
    """(batch, length) int32: the word of each token of `ids`, counted from
    0; -1 for PAD, BOS, EOS and bare spaces. A first token that starts no
    word (a window cut inside a word) is still word 0, and a token after a
    bare space starts one."""
    ids = ops.cast(ids, "int32")
    kind = ops.take(ops.convert_to_tensor(kinds), ids)
    real = ops.logical_not(ops.logical_or(ops.equal(ids, PAD_ID), ops.logical_or(ops.equal(ids, BOS_ID),
                                                                                  ops.equal(ids, EOS_ID))))
    space = ops.logical_and(real, ops.equal(kind, SPACE))
    wordy = ops.logical_and(real, ops.logical_not(space))
    after_space = ops.concatenate([ops.zeros_like(space[:, :1]), space[:, :-1]], axis=1)  # follows a bare space
    first = ops.equal(ops.cumsum(ops.cast(wordy, "int32"), axis=1), 1)  # the first token in a word
    begins = ops.logical_and(wordy, ops.logical_or(ops.logical_or(ops.equal(kind, STARTS), first), after_space))
    numbers = ops.cumsum(ops.cast(begins, "int32"), axis=1) - 1
    return ops.where(wordy, numbers, -1)


def _one_hot(numbers, depth):
    """(batch, length, depth) float32: 1 where `numbers` names the slot (none for -1)."""
    return ops.cast(ops.equal(numbers[:, :, None], ops.arange(depth, dtype="int32")[None, None, :]), "float32")


def word_links(attention, source_ids, target_ids, kinds):
    """The source word of each target word, from attention over pieces.

    Args:
        attention: `(batch, target_length, source_length)`: each target
            piece's attention over the source pieces.
        source_ids, target_ids: `(batch, source_length)` and `(batch,
            target_length)` ids; PAD, BOS and EOS belong to no word.
        kinds: `piece_kinds(tokenizer)`: one table, or a pair of the source's
            and the target's.

    Returns:
        `(links, source_count, inside, target_count)`: int32 `(batch,
        target_length)`, at `[b, j]` the source word that target word `j`
        attends to most, -1 past the last target word (or where the source
        has no word); the number of source words `(batch,)`; whether the
        source starts inside a word (a window's) `(batch,)`; and the number
        of target words `(batch,)`.
    """
    source_kinds, kinds = kinds if isinstance(kinds, tuple) else (kinds, kinds)
    source_words, target_words = word_numbers(source_ids, source_kinds), word_numbers(target_ids, kinds)
    source_length, target_length = ops.shape(source_ids)[1], ops.shape(target_ids)[1]
    # (batch, target words, source words): the attention summed over the pieces of each word.
    per_word = ops.matmul(ops.matmul(ops.transpose(_one_hot(target_words, target_length), (0, 2, 1)),
                                     ops.cast(attention, "float32")), _one_hot(source_words, source_length))
    source_count, target_count = ops.max(source_words, axis=1) + 1, ops.max(target_words, axis=1) + 1  # (batch,)
    exists = ops.logical_and(ops.arange(target_length, dtype="int32")[None, :] < target_count[:, None],
                             (source_count > 0)[:, None])
    links = ops.where(exists, ops.cast(ops.argmax(per_word, axis=-1), "int32"), -1)
    inside = ops.equal(ops.take(ops.convert_to_tensor(source_kinds), ops.cast(source_ids, "int32")[:, 0]), CONTINUES)
    return links, source_count, ops.logical_and(inside, source_count > 0), target_count
