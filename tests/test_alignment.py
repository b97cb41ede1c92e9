"""Word numbering for alignments, against a plain-Python reading of the text."""

import numpy as np
from keras import ops

from keras_transformer.translation.alignment import WORD_START, piece_kinds, word_numbers

PIECES = ["<pad>", "<unk>", "<s>", "</s>", "\u2581big", "\u2581", "\u2581a", "b", "c", "\u2581cat"]


class _Tokenizer:
    vocab_size = len(PIECES)

    def id_to_piece(self, ids):
        return [PIECES[i] for i in ids]


def _reference(ids):
    """Each token's word as one reads the decoded text: a bare "▁" is a space
    in no word, and a piece starts a word after a space or with its "▁"."""
    numbers, word, in_word = [], -1, False
    for i in ids:
        piece = PIECES[i]
        if i in (0, 2, 3) or piece == WORD_START:
            numbers.append(-1)
            in_word = in_word and piece != WORD_START
            continue
        if piece.startswith(WORD_START) or not in_word:
            word, in_word = word + 1, True
        numbers.append(word)
    return numbers


def test_word_numbers_follow_the_words_of_the_text():
    rows = [
        [2, 4, 5, 6, 7, 5, 8, 3],  # "big  ab c": a bare space before a word, and one before a piece
        [7, 8, 9, 5, 5, 9, 3, 0],  # a window cut inside a word, then two spaces
        [5, 7, 4, 3, 0, 0, 0, 0],  # a space first: "b" starts the first word
    ]
    got = ops.convert_to_numpy(word_numbers(np.array(rows), piece_kinds(_Tokenizer())))
    for row, numbers in zip(rows, got):
        assert numbers.tolist() == _reference(row)
        text = "".join(PIECES[i] for i in row if i > 3).replace(WORD_START, " ")
        assert max(numbers) + 1 == len(text.split()), text
