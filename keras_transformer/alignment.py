"""Word alignments from cross-attention, in Pharaoh format.

A translation's alignment links each of its whitespace words to the source
word it attends to most: the cross-attention of one decoder layer, the mean
of its heads (`keras_transformer.decoding.scoring.force_decode`), summed
over the subword pieces of each word. Pharaoh format writes the links as
`source-target` pairs of 0-based word indices: `"0-0 1-2 2-1"`.
"""

import numpy as np

WORD_START = "\u2581"  # SentencePiece's mark of a piece that starts a word


def word_indices(pieces):
    """The whitespace word of each subword piece: a piece starting with "▁"
    starts a word (so does the first piece)."""
    words, index = [], -1
    for piece in pieces:
        if index < 0 or piece.startswith(WORD_START):
            index += 1
        words.append(index)
    return words


def align_words(attention, source_words, target_words):
    """`[(source word, target word)]`, one link per target word, in order.

    Args:
        attention: `(target pieces, source pieces)`, each target piece's
            attention over the source pieces (EOS and padding left out).
        source_words, target_words: the word of each piece (`word_indices`).
    """
    attention = np.asarray(attention, dtype="float64")
    if not len(source_words) or not len(target_words):
        return []
    words = np.zeros((max(target_words) + 1, max(source_words) + 1))
    np.add.at(words, (np.asarray(target_words)[:, None], np.asarray(source_words)[None, :]), attention)
    return [(int(np.argmax(row)), t) for t, row in enumerate(words)]


def pharaoh(links):
    """`"s-t s-t ..."` of `[(s, t)]` links."""
    return " ".join(f"{s}-{t}" for s, t in links)
