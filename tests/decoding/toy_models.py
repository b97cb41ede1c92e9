"""Hand-built "models" with the decoding interface of `Transformer`.

Each exposes `encode`, `init_cache` and `decode` (cached and uncached) in
`keras.ops`, so that the decoders can be checked against known answers.
"""

from types import SimpleNamespace

import numpy as np
from keras import ops

from keras_transformer.tokens import EOS_ID as EOS


class BigramModel:
    """Next-token log-probabilities depend on the previous token only:
    `log_probs[previous]`, a fixed `(vocab, vocab)` table. The source is
    ignored. The cache records the decoded tokens."""

    built = True

    def __init__(self, log_probs, max_length=16):
        self.table = np.asarray(log_probs, dtype="float32")
        vocab = self.table.shape[0]
        self.transformer_config = SimpleNamespace(max_length=max_length, vocab_size=vocab)

    def encode(self, source_ids):
        return ops.cast(source_ids, "float32")[:, :, None]  # (batch, S, 1)

    def init_cache(self, memory, max_length):
        batch = ops.shape(memory)[0]
        return {
            "self_attention": [ops.zeros((batch, max_length), dtype="int32")],
            "cross_attention": [memory],
        }

    def decode(self, target_ids, memory, source_mask, cache=None, cache_update_index=None):
        logits = ops.take(ops.convert_to_tensor(self.table), target_ids, axis=0)
        if cache is None:
            return logits
        zero = ops.zeros_like(cache_update_index)
        history = ops.slice_update(
            cache["self_attention"][0], (zero, cache_update_index), ops.cast(target_ids, "int32")
        )
        return logits, {"self_attention": [history], "cross_attention": cache["cross_attention"]}


class CopyModel:
    """Output token `p` is source token `p` (EOS after the source): a
    perfect "translation" that copies, to test batching and the
    `Translator`. Reads the source from the cross-attention cache when
    decoding with a cache, as the Transformer does."""

    built = True

    def __init__(self, vocab_size=16, max_length=16, confidence=8.0):
        self.vocab_size = vocab_size
        self.confidence = confidence
        self.transformer_config = SimpleNamespace(max_length=max_length, vocab_size=vocab_size)

    def encode(self, source_ids):
        return ops.cast(source_ids, "float32")[:, :, None]

    def init_cache(self, memory, max_length):
        batch = ops.shape(memory)[0]
        return {
            "self_attention": [ops.zeros((batch, max_length), dtype="int32")],
            "cross_attention": [memory],
        }

    def _logits(self, memory, positions):
        source = ops.cast(memory[:, :, 0], "int32")  # (batch, S)
        batch = ops.shape(source)[0]
        tail = ops.full((batch, self.transformer_config.max_length + 1), EOS, dtype="int32")
        extended = ops.concatenate([source, tail], axis=1)
        tokens = ops.take(extended, positions, axis=1)  # (batch, T)
        tokens = ops.where(ops.equal(tokens, 0), EOS, tokens)
        return self.confidence * ops.one_hot(tokens, self.vocab_size)

    def decode(self, target_ids, memory, source_mask, cache=None, cache_update_index=None):
        length = target_ids.shape[1]
        if cache is None:
            return self._logits(memory, ops.arange(length))
        # The cache has a row a sentence, the target a row a hypothesis.
        memory = cache["cross_attention"][0]
        memory = ops.repeat(memory, ops.shape(target_ids)[0] // ops.shape(memory)[0], axis=0)
        return self._logits(memory, cache_update_index + ops.arange(length)), cache


class WordTokenizer:
    """Whitespace tokenizer over a fixed word list; ids start at 4."""

    def __init__(self, words):
        self.words = list(words)
        self.ids = {w: i + 4 for i, w in enumerate(self.words)}

    def encode(self, texts):
        return [[self.ids[w] for w in text.split()] for text in texts]

    def decode(self, ids):
        return [" ".join(self.words[i - 4] for i in row if i >= 4) for row in ids]
