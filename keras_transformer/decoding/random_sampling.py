"""Random sampling: each next token drawn from the model's distribution.

For back-translation and diverse outputs. The distribution is sharpened or
flattened by a temperature, then cut to the `top_k` most likely tokens
and to the smallest set whose probability reaches `top_p` (nucleus
sampling, Holtzman et al., 2020). A token is drawn by the Gumbel-max trick
from numbers of `keras_transformer.decoding.stateless_random`, which
depend only on the sentence (its source ids and the seed), the step and the
token: a sentence samples the same output alone and in any batch.
"""

import numbers

import numpy as np
from keras import ops

from keras_transformer.decoding.defaults import ALPHA, SAMPLING
from keras_transformer.decoding.samplers import OneOutputSampler
from keras_transformer.decoding.stateless_random import sentence_keys, uniform
from keras_transformer.tokens import BOS_ID, PAD_ID
from keras_transformer.validation import check_non_negative_int


def _check_sampling(top_k, top_p, temperature, seed):
    check_non_negative_int("top_k", top_k)
    if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or not 0 < top_p <= 1:
        raise ValueError(f"Argument `top_p` must be a number in (0, 1]. Received: top_p={top_p!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or not temperature > 0:
        raise ValueError(f"Argument `temperature` must be a number > 0. Received: temperature={temperature!r}")
    check_non_negative_int("seed", seed)
    if seed >= 1 << 31:
        raise ValueError(f"Argument `seed` must be below 2**31. Received: seed={seed!r}")


class RandomSampler(OneOutputSampler):
    """Samples each next token: a sampler of `decode`, one output per sentence.

    Args:
        top_k: int >= 0. Draw from the `top_k` most likely tokens; 0: all.
        top_p: float in (0, 1]. Draw from the most likely tokens whose
            probabilities sum to at least `top_p`; 1: all.
        temperature: float > 0. The log-probabilities are divided by it
            before drawing: below 1 sharper, above 1 flatter.
        seed: int in [0, 2**31). With a sentence's source ids, it makes the
            sentence's own key: the same seed samples the same outputs.
        alpha: float >= 0. Scores are the model's log-probabilities of the
            drawn tokens (at temperature 1, uncut) over the length
            penalty, as beam search scores its outputs.
        length_penalty: the penalty's kind (`decoding.common.LENGTH_PENALTIES`).

    Padding and BOS are never drawn.

    Example:

    >>> sampler = RandomSampler(top_p=0.9, seed=7)
    >>> tokens, scores = sampler(model, [[5, 6, 7, 3]])
    """

    def __init__(self, top_k=SAMPLING["top_k"], top_p=SAMPLING["top_p"], temperature=SAMPLING["temperature"],
                 seed=SAMPLING["seed"], alpha=ALPHA, length_penalty="gnmt"):
        super().__init__(alpha, length_penalty)
        _check_sampling(top_k, top_p, temperature, seed)
        self.top_k, self.top_p, self.temperature, self.seed = int(top_k), float(top_p), float(temperature), int(seed)

    def keys(self, source_ids):
        return sentence_keys(self.seed, source_ids)

    @classmethod
    def from_tensors(cls, top_k, top_p, temperature, seed, alpha=ALPHA, length_penalty="gnmt"):
        """A sampler whose settings are scalar tensors, as a SavedModel's
        signature takes them: not checked here, but brought into range (a
        `top_k` below 0 or a `top_p` outside (0, 1] keeps every token, a
        `temperature` at or below 0 is a tiny one)."""
        sampler = cls(alpha=alpha, length_penalty=length_penalty)
        sampler.top_k = ops.maximum(ops.cast(top_k, "int32"), 0)
        top_p = ops.cast(top_p, "float32")
        sampler.top_p = ops.where(ops.logical_and(top_p > 0, top_p <= 1), top_p, 1.0)
        sampler.temperature = ops.maximum(ops.cast(temperature, "float32"), 1e-6)
        sampler.seed = ops.cast(seed, "int32")
        return sampler

    def choose(self, log_probs, state, step):
        vocab = log_probs.shape[-1]
        tokens = ops.arange(vocab, dtype="int32")
        drawable = ops.logical_and(ops.not_equal(tokens, PAD_ID), ops.not_equal(tokens, BOS_ID))[None, :]  # (1, vocab)
        logits = ops.where(drawable, log_probs / self.temperature, -np.inf)  # (batch, vocab)
        ranked = ops.top_k(logits, vocab)[0]  # (batch, vocab), most likely first
        k = ops.where(self.top_k > 0, ops.minimum(self.top_k, vocab), vocab)  # () the tokens top-k keeps
        in_top_k = ops.less(tokens, k)[None, :]  # (1, vocab) by rank
        probs = ops.softmax(ops.where(in_top_k, ranked, -np.inf), axis=-1)  # the top k's distribution
        above = ops.cumsum(probs, axis=-1) - probs  # the mass ranked above each token
        kept = ops.logical_and(ops.logical_and(in_top_k, ops.less(above, self.top_p)), ops.isfinite(ranked))
        least = ops.min(ops.where(kept, ranked, np.inf), axis=-1, keepdims=True)  # (batch, 1)
        keep = ops.logical_and(drawable, ops.greater_equal(logits, least))
        gumbel = -ops.log(-ops.log(uniform(state.keys, step, vocab)))  # (batch, vocab)
        return ops.cast(ops.argmax(ops.where(keep, logits + gumbel, -np.inf), axis=-1), "int32")

    def get_config(self):
        return {"beam_size": 1, "alpha": self.alpha, "length_penalty": self.length_penalty, "top_k": self.top_k,
                "top_p": self.top_p, "temperature": self.temperature, "seed": self.seed}

    def __repr__(self):
        return (f"RandomSampler(top_k={self.top_k}, top_p={self.top_p}, temperature={self.temperature}, "
                f"seed={self.seed}, alpha={self.alpha})")
