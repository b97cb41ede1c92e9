"""A shared subword vocabulary: SentencePiece BPE, in Python and in the graph."""

import io
import os

PAD_ID = 0  # padding, masked by the model
UNK_ID = 1
BOS_ID = 2  # starts every decoder input
EOS_ID = 3  # ends every source and target


class SubwordTokenizer:
    """A SentencePiece BPE vocabulary shared by source and target.

    `encode`/`decode` work in pure Python (no TensorFlow needed);
    `tokenize`/`detokenize` run inside the TensorFlow graph with
    tensorflow-text, so they can sit in a `tf.data` pipeline or a SavedModel.
    Special ids are fixed: 0 padding, 1 unknown, 2 BOS, 3 EOS.

    Sizes: the paper uses about 37,000 shared pieces for WMT14 En-De and
    32,000 for En-Fr; a small corpus such as Tatoeba wants about 8,000.

    Example:

    >>> tokenizer = SubwordTokenizer.train(["Hello world.", "Bonjour le monde."] * 50, vocab_size=60)
    >>> tokenizer.decode(tokenizer.encode(["Hello world."]))
    ['Hello world.']
    """

    def __init__(self, model_proto):
        import sentencepiece as spm

        self.model_proto = bytes(model_proto)
        self.processor = spm.SentencePieceProcessor(model_proto=self.model_proto)
        self._in_graph = None

    @classmethod
    def train(cls, texts, vocab_size=8000, model_type="bpe", max_sentences=2_000_000, seed=0):
        """Learns a vocabulary from strings or text files (one sentence a line).

        Args:
            texts: an iterable of strings, or a list of file paths.
            vocab_size: int. Number of pieces, special ones included.
            model_type: `"bpe"` (the paper's byte-pair encoding) or `"unigram"`.
            max_sentences: sample at most this many sentences.
            seed: int. Seed of that sample (and of SentencePiece's own).
        """
        import sentencepiece as spm

        spm.set_random_generator_seed(seed)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 8:
            raise ValueError(f"Argument `vocab_size` must be an integer >= 8. Received: vocab_size={vocab_size!r}")
        if isinstance(texts, str):
            raise ValueError("Argument `texts` must be an iterable of strings or a list of paths, not one string.")
        texts = list(texts)
        files = bool(texts) and all(isinstance(t, (str, os.PathLike)) and os.path.isfile(t) for t in texts)
        if not files:
            texts = [t for t in texts if isinstance(t, str) and t.strip()]
        if not texts:
            raise ValueError("Argument `texts` holds no non-empty sentence to learn a vocabulary from.")
        model = io.BytesIO()
        options = dict(
            model_writer=model, vocab_size=vocab_size, model_type=model_type,
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
            character_coverage=1.0, normalization_rule_name="nfkc",
            input_sentence_size=max_sentences, shuffle_input_sentence=True,
            num_threads=os.cpu_count() or 1, minloglevel=2, hard_vocab_limit=False,
        )
        if files:
            options["input"] = ",".join(os.fspath(t) for t in texts)
        else:
            options["sentence_iterator"] = iter(texts)
        spm.SentencePieceTrainer.train(**options)
        return cls(model.getvalue())

    @classmethod
    def load(cls, path):
        """Loads `tokenizer.model` from a file or the folder holding it."""
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer.model")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"No tokenizer model at {os.fspath(path)!r}")
        with open(path, "rb") as f:
            return cls(f.read())

    def save(self, directory):
        """Writes `directory/tokenizer.model`; returns its path."""
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, "tokenizer.model")
        with open(path, "wb") as f:
            f.write(self.model_proto)
        return path

    @property
    def vocab_size(self):
        return self.processor.get_piece_size()

    def encode(self, sentences):
        """Token ids of each sentence (no BOS/EOS): a list of lists of ints."""
        return self.processor.encode(list(sentences))

    def decode(self, ids):
        """Text of each id list; padding, BOS and EOS are dropped."""
        return self.processor.decode([[int(i) for i in row if int(i) > EOS_ID] for row in ids])

    def id_to_piece(self, ids):
        return [self.processor.id_to_piece(int(i)) for i in ids]

    @property
    def in_graph(self):
        """The `tensorflow_text.SentencepieceTokenizer` of this vocabulary."""
        if self._in_graph is None:
            import tensorflow as tf
            import tensorflow_text as tf_text

            with tf.init_scope():  # a resource that outlives any tf.function trace
                self._in_graph = tf_text.SentencepieceTokenizer(model=self.model_proto)
        return self._in_graph

    def tokenize(self, strings):
        """In-graph: `tf.string [batch]` -> ragged int32 `[batch, None]`."""
        import tensorflow as tf

        return tf.cast(self.in_graph.tokenize(strings), tf.int32)

    def detokenize(self, ids):
        """In-graph: int ids (dense 0-padded or ragged) -> `tf.string`.

        Everything from the first EOS on, padding and BOS are dropped.
        """
        import tensorflow as tf

        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids)
            before_eos = tf.math.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=-1) == 0
            ids = tf.ragged.boolean_mask(ids, before_eos & (ids > EOS_ID))
        else:
            ids = tf.ragged.boolean_mask(ids, ids > EOS_ID)
        return self.in_graph.detokenize(ids)
