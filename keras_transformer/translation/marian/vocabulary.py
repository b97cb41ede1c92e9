"""Our ids of a Marian model's vocabulary.

Ours are fixed (`keras_transformer.tokens`: PAD 0, UNK 1, BOS 2, EOS 3) and
every rule of the package reads them there; Marian's vocabulary has EOS at
0 and UNK at 1, Hugging Face's adds PAD last, and the decoder starts from
PAD's embedding (Hugging Face) or from zeros (Marian). So the import
permutes the vocabulary: ours is `<pad> <unk> <s> </s>`, then the source's
other pieces in their order. PAD's and BOS's rows are the source's PAD row
(zeros for Marian), so that the decoder starts as the source's does, and
both are `suppressed_ids`: decoding never outputs them, as Marian's
vocabulary has no PAD and Hugging Face's generation config bans it
(`bad_words_ids`).
"""

import re

import numpy as np

from keras_transformer.translation.marian.checkpoint import refuse

# Our special pieces, by id (`keras_transformer.tokens`).
SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>")


def permutation(pieces, special):
    """The source's id of each of our ids: `<pad> <unk> <s> </s>` (PAD's and
    BOS's rows are `special`'s "pad" row, or none: -1), then the source's
    other ids in order."""
    taken = {special["eos"], special["unk"], special["pad"]}
    pad = -1 if special["pad"] is None else special["pad"]
    return np.array([pad, special["unk"], pad, special["eos"]] + [i for i in range(len(pieces)) if i not in taken])


def our_pieces(pieces, order):
    """Our vocabulary's pieces: our special ones, then the source's in `order`."""
    ours = list(SPECIAL_PIECES) + [pieces[i] for i in order[len(SPECIAL_PIECES):]]
    seen = set()
    repeated = [p for p in ours if p in seen or seen.add(p)]
    if repeated:
        raise ValueError(f"The vocabulary holds pieces that are special here ({SPECIAL_PIECES}) or repeated: "
                         f"{repeated[:5]}")
    codes = [p for p in ours if re.fullmatch(r">>.+<<", p)]
    if codes:
        raise refuse("vocabulary", codes[:5] + (["..."] if len(codes) > 5 else []),
                     f"its {len(codes)} target-language tokens are not split off a source by the tokenizer here",
                     "the model's vocabulary")
    return ours
