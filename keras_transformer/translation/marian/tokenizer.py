"""Our tokenizer's SentencePiece models of a Marian model.

Sources are segmented with `source.spm`, targets with `target.spm`, and
the pieces looked up in the vocabulary (unknown ones are UNK), as
`MarianTokenizer` does. Each SentencePiece model is rewritten so that its
ids are ours (`vocabulary`): our special pieces first, then the
vocabulary's pieces in our order, each with its own score where the model
has it and marked unused otherwise (never produced: the other side's
pieces; control pieces in a BPE model, which would merge into unused ones),
then the model's pieces the vocabulary lacks, which segment text as before
and are UNK to the model (`SubwordTokenizer`'s `vocab_size`). An unknown
piece decodes to nothing, as `MarianTokenizer.decode(skip_special_tokens=True)`.
"""

from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.translation import sentencepiece_model as spm_model
from keras_transformer.translation.marian.vocabulary import SPECIAL_PIECES, our_pieces, permutation


def rewrite_sentencepiece(proto, pieces):
    """`proto` (a SentencePiece model) with our ids: `pieces` (our
    vocabulary) first, each with the model's own score and type where it
    has the piece, else unused (never produced), then the model's pieces
    that `pieces` lacks (they segment text as before; the tokenizer maps
    them to UNK). Our special pieces are the model's special ones; an
    unknown piece decodes to nothing."""
    own = {p.piece: p for p in spm_model.read_pieces(proto)
           if p.type in (spm_model.NORMAL, spm_model.USER_DEFINED, spm_model.BYTE)}
    # A BPE model merges into unused pieces (and splits them again), which
    # would change its segmentation; it never uses control pieces.
    absent = spm_model.CONTROL if spm_model.model_type(proto) == spm_model.BPE else spm_model.UNUSED
    special = [spm_model.Piece(p, 0.0, spm_model.UNKNOWN if i == UNK_ID else spm_model.CONTROL)
               for i, p in enumerate(SPECIAL_PIECES)]
    vocabulary = special + [own.get(p, spm_model.Piece(p, 0.0, absent)) for p in pieces[len(SPECIAL_PIECES):]]
    inside = set(pieces)
    extra = [p for p in own.values() if p.piece not in inside]
    names = dict(zip(("pad", "unk", "bos", "eos"), SPECIAL_PIECES))
    return spm_model.rewrite(proto, vocabulary + extra, vocab_size=len(pieces), special={
        "pad_id": PAD_ID, "unk_id": UNK_ID, "bos_id": BOS_ID, "eos_id": EOS_ID, "unk_surface": "",
        **{f"{side}_piece": piece for side, piece in names.items()}})


def protos(checkpoint):
    """The SentencePiece models of our tokenizer of a `Checkpoint`, the
    source's and the target's rewritten with our ids: `(source, target)`,
    `target` None when one model serves both sides."""
    source_pieces = our_pieces(checkpoint.source_pieces, permutation(checkpoint.source_pieces, checkpoint.special[0]))
    target_pieces = our_pieces(checkpoint.target_pieces, permutation(checkpoint.target_pieces, checkpoint.special[1]))
    source_spm, target_spm = checkpoint.spm
    source = rewrite_sentencepiece(source_spm, source_pieces)
    if source_spm == target_spm and source_pieces == target_pieces:
        return source, None
    return source, rewrite_sentencepiece(target_spm, target_pieces)
