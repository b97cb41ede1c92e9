"""A shared subword vocabulary: SentencePiece BPE.

`encode`/`decode` only need the `sentencepiece` package (no TensorFlow: for
JAX or PyTorch machines). The same ids in TensorFlow ops, for tf.data and
the SavedModel, are `keras_transformer.translation.preprocessor`'s graph face.

An imported model (`keras_transformer.translation.marian`) brings a source
and a target SentencePiece model instead of one: `encode` reads sources,
`encode_target` targets, and `decode` writes targets.

Example:

>>> tokenizer = SubwordTokenizer.train(sentences, vocab_size=8000)
>>> tokenizer.encode(["Où est la gare ?"])           # [[412, 77, 9, 1290, 31]]
>>> tokenizer.decode([[412, 77, 9, 1290, 31, EOS_ID, PAD_ID]])
['Où est la gare ?']
>>> tokenizer.save("runs/en_fr")                     # runs/en_fr/tokenizer.model
"""

import io
import os
import re

import numpy as np

from keras_transformer.atomic_files import atomic_write
from keras_transformer.models import presets
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID, unpack_output
from keras_transformer.translation import marian
from keras_transformer.translation.marian import tokenizer as marian_tokenizer
from keras_transformer.translation.sentencepiece_model import model_vocab_size
from keras_transformer.translation.sentences import normalize

MODEL_FILENAME = "tokenizer.model"
TARGET_MODEL_FILENAME = "target_tokenizer.model"  # an imported model's target side
MODEL_TYPES = ("bpe", "unigram")


def _processor(proto, name):
    """`(SentencePieceProcessor, vocabulary size)` of the model bytes `proto`
    (argument `name`). The vocabulary is the model's first
    `trainer_spec.vocab_size` pieces (all of a model trained here); an
    imported model's pieces after them segment text as its source's
    SentencePiece model does, and are unknown to the model (`known_ids`)."""
    import sentencepiece as spm

    if not isinstance(proto, (bytes, bytearray)) or not proto:
        raise ValueError(f"Argument `{name}` must be the non-empty bytes of a SentencePiece model. "
                         f"Received: {type(proto).__name__}")
    try:
        processor = spm.SentencePieceProcessor(model_proto=bytes(proto))
    except (RuntimeError, OSError) as error:
        raise ValueError(f"Argument `{name}` is not a valid SentencePiece model: {error}") from None
    special = [processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id()]
    if special != [PAD_ID, UNK_ID, BOS_ID, EOS_ID]:
        raise ValueError(
            f"The SentencePiece model must use ids pad={PAD_ID}, unk={UNK_ID}, bos={BOS_ID}, "
            f"eos={EOS_ID}. Received: pad, unk, bos, eos = {special}"
        )
    pieces = processor.get_piece_size()
    size = model_vocab_size(bytes(proto))
    return processor, size if size is not None and 0 < size < pieces else pieces


def known_ids(rows, vocab_size):
    """`rows` of ids with each id at or past `vocab_size` made `UNK_ID`."""
    return [[i if i < vocab_size else UNK_ID for i in row] for row in rows]


class SubwordTokenizer:
    """A SentencePiece vocabulary shared by source and target languages.

    The paper encodes sentences with byte-pair encoding and a shared
    vocabulary of about 37,000 pieces for WMT14 English-German and 32,000
    for English-French. Small corpora need smaller vocabularies: about
    8,000 for the shipped Tatoeba corpus (the default here).

    Special ids are fixed (`keras_transformer.tokens`): `PAD_ID = 0` (the
    model masks it), `UNK_ID = 1`, `BOS_ID = 2`, `EOS_ID = 3`. Text is normalized with
    NFKC, so `decode(encode(text)) == text` for NFKC-normalized text
    (accents, punctuation such as « », digits, whitespace runs collapsed).
    A vocabulary learned with byte fallback (`train`'s default) keeps every
    other character too, as UTF-8 byte pieces.

    `encode`/`decode` work on Python lists; the preprocessor's graph face
    (`keras_transformer.translation.preprocessor`) gives the same ids in TensorFlow ops.

    An imported model's tokenizer has a SentencePiece model for each side,
    whose ids are the model's (`keras_transformer.translation.marian`):
    `encode` reads sources with the first, `encode_target` targets with the
    second, and `decode` and `id_to_piece` write targets. One model serves
    both sides otherwise.

    Args:
        model_proto: bytes of a serialized SentencePiece model (what
            `train` builds and `save` writes).
        target_model_proto: optional bytes of the target side's model.

    Example:

    >>> tokenizer = SubwordTokenizer.train(["Hello world.", "Bonjour le monde."] * 50, vocab_size=60)
    >>> tokenizer.decode(tokenizer.encode(["Hello world."]))
    ['Hello world.']
    """

    def __init__(self, model_proto, target_model_proto=None):
        self.processor, self.vocab_size = _processor(model_proto, "model_proto")
        self.model_proto = bytes(model_proto)
        self.target_model_proto = None if target_model_proto is None else bytes(target_model_proto)
        if self.target_model_proto is None:
            self.target_processor, self.target_vocab_size = self.processor, self.vocab_size
        else:
            self.target_processor, self.target_vocab_size = _processor(target_model_proto, "target_model_proto")

    # ------------------------------------------------------------ training
    @classmethod
    def train(
        cls,
        texts=None,
        vocab_size=8000,
        model_type="bpe",
        input_sentence_size=2_000_000,
        seed=0,
        *,
        files=None,
        num_threads=None,
        character_coverage=1.0,
        byte_fallback=True,
    ):
        """Learns a vocabulary from strings and/or text files, offline.

        Args:
            texts: an iterable of strings (sentences of both languages).
            vocab_size: int >= 8. Number of pieces, special ones included.
                On tiny corpora SentencePiece may stop short of it.
            model_type: `"bpe"` (the paper's byte-pair encoding) or `"unigram"`.
            input_sentence_size: sample at most this many sentences (with
                `shuffle_input_sentence`), which keeps WMT-sized corpora fast.
            seed: int. Seed of that sample.
            files: paths of text files, one sentence a line (plain text).
            num_threads: training threads (default: all CPU cores).
            character_coverage: share of characters that get their own
                piece; 1.0 keeps every accent of small corpora.
            byte_fallback: bool. A character without a piece of its own (an
                emoji, a script absent from the texts) is encoded as its
                UTF-8 bytes, one of 256 byte pieces, and decoded back, instead
                of becoming `UNK_ID`: no character is lost. The vocabulary
                then needs room for the 256 byte pieces besides the
                characters and the special pieces.

        Returns:
            A `SubwordTokenizer`.
        """
        import sentencepiece as spm

        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 8:
            raise ValueError(f"Argument `vocab_size` must be an integer >= 8. Received: vocab_size={vocab_size!r}")
        if model_type not in MODEL_TYPES:
            raise ValueError(f"Argument `model_type` must be one of {MODEL_TYPES}. Received: model_type={model_type!r}")
        if isinstance(texts, (str, bytes)):
            raise ValueError("Argument `texts` must be an iterable of strings, not one string; use `files=` for paths.")
        paths = [os.fspath(p) for p in ([files] if isinstance(files, (str, os.PathLike)) else files or [])]
        for path in paths:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"Argument `files` names a missing file. Received: {path!r}")
        sentences = [t for t in (texts or []) if isinstance(t, str) and t.strip()]
        if not sentences and not any(os.path.getsize(p) for p in paths):
            raise ValueError(
                "Arguments `texts`/`files` hold no non-empty sentence to learn a vocabulary from. "
                f"Received: texts with 0 non-empty strings, files={paths}"
            )
        if sentences:  # one stream: in-memory sentences first, then the files
            sentences = iter(sentences + [line for p in paths for line in _read_lines(p)])
        spm.set_random_generator_seed(seed)
        model = io.BytesIO()
        options = dict(
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
            character_coverage=character_coverage,
            byte_fallback=bool(byte_fallback),
            normalization_rule_name="nfkc",
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            num_threads=num_threads or os.cpu_count() or 1,
            hard_vocab_limit=False,  # tiny corpora: fewer pieces, not an error
            minloglevel=2,
        )
        if sentences:
            options["sentence_iterator"] = sentences
        else:
            options["input"] = ",".join(paths)
        try:
            spm.SentencePieceTrainer.train(**options)
        except RuntimeError as error:  # e.g. "Vocabulary size is smaller than required_chars. 50 vs 108."
            needed = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(error))
            if not needed:
                raise
            raise ValueError(
                f"Argument `vocab_size` must be >= {needed.group(1)} for this corpus. "
                f"Received: vocab_size={vocab_size}"
            ) from None
        return cls(model.getvalue())

    # ------------------------------------------------------------ files
    @classmethod
    def load(cls, path):
        """Loads a model file, or `tokenizer.model` inside a folder (with
        `target_tokenizer.model` beside it, if there is one)."""
        path = os.fspath(path)
        target = None
        if os.path.isdir(path):
            target = os.path.join(path, TARGET_MODEL_FILENAME)
            path = os.path.join(path, MODEL_FILENAME)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"No tokenizer model file. Received: path={path!r}")
        protos = [_read(path)] + ([_read(target)] if target and os.path.isfile(target) else [])
        try:
            return cls(*protos)
        except ValueError as error:
            raise ValueError(f"Tokenizer file {path!r}: {error}") from None

    def save(self, directory):
        """Writes `directory/tokenizer.model` (the model bytes), and
        `target_tokenizer.model` for a target side of its own, atomically;
        returns the first's path.

        A full disk or a crash never leaves a truncated model file
        (`keras_transformer.atomic_files`).
        """
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, MODEL_FILENAME)
        target = os.path.join(directory, TARGET_MODEL_FILENAME)
        if self.target_model_proto is not None:
            atomic_write(target, self.target_model_proto)
        elif os.path.exists(target):
            os.remove(target)  # one model serves both sides now
        atomic_write(path, self.model_proto)
        return path

    @classmethod
    def from_preset(cls, preset):
        """The tokenizer of a preset: a shipped name or a preset directory,
        or a Marian model (`presets.load_model`)."""
        if marian.is_marian(preset):
            return cls(*[p for p in marian_tokenizer.protos(marian.read(preset, weights=False)) if p is not None])
        return cls.load(presets.preset_directory(preset))

    def save_to_preset(self, preset_dir):
        """Writes `tokenizer.model` (and an imported model's
        `target_tokenizer.model`) into a preset directory; returns the
        first's path."""
        return self.save(preset_dir)

    # ------------------------------------------------------------ Python
    @property
    def shared(self):
        """Whether one SentencePiece model serves sources and targets."""
        return self.target_model_proto is None

    def encode(self, sentences):
        """Ids of each source sentence, without BOS/EOS: `list[str] -> list[list[int]]`.

        Each is normalized first (`keras_transformer.translation.sentences.normalize`:
        invisible characters removed or made spaces). A single string gives
        a single list of ids.
        """
        return self._encode(self.processor, self.vocab_size, sentences)

    def encode_target(self, sentences):
        """`encode` for target sentences (training targets, target
        prefixes, constraints, translations to score)."""
        return self._encode(self.target_processor, self.target_vocab_size, sentences)

    @staticmethod
    def _encode(processor, vocab_size, sentences):
        single = isinstance(sentences, str)
        rows = processor.encode([normalize(sentences)] if single else [normalize(s) for s in sentences])
        if vocab_size < processor.get_piece_size():
            rows = known_ids(rows, vocab_size)
        return rows[0] if single else rows

    def decode(self, ids):
        """Text of each target id sequence: `list[list[int]] -> list[str]`.

        Padding and BOS are dropped and each sequence ends at its first EOS
        (as decoder outputs do); a single flat list gives a single string.
        """
        rows = ids.tolist() if hasattr(ids, "tolist") else [list(r) if hasattr(r, "__iter__") else r for r in ids]
        if rows and not isinstance(rows[0], list):  # one flat sequence
            return self.target_processor.decode(unpack_output(rows))
        return self.target_processor.decode([unpack_output(row) for row in rows])

    def continues_word(self):
        """(target vocab,) bool: the pieces that continue the word before them:
        no word-start mark ("▁"), and a letter or digit first (punctuation
        ends a word; special tokens and byte pieces are written `<...>`)."""
        pieces = self.id_to_piece(range(self.target_vocab_size))
        return np.array([not p.startswith("\u2581") and p[:1].isalnum() for p in pieces], dtype=bool)

    def id_to_piece(self, ids):
        """Pieces of target ids (e.g. `"▁chat"`), for attention plots and
        scores: ints -> strs."""
        return _pieces(self.target_processor, ids)

    def source_id_to_piece(self, ids):
        """`id_to_piece` of source ids."""
        return _pieces(self.processor, ids)


def _pieces(processor, ids):
    if isinstance(ids, int) or hasattr(ids, "dtype") and getattr(ids, "ndim", 1) == 0:
        return processor.id_to_piece(int(ids))
    return [processor.id_to_piece(int(i)) for i in ids]


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _read_lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n") for line in f if line.strip()]
