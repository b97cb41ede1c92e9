"""Greedy decoding: the most likely next token at every step."""

from keras import ops

from keras_transformer.decoding.defaults import MAX_EXTRA_LENGTH
from keras_transformer.decoding.loop import decode
from keras_transformer.decoding.samplers import OneOutputSampler
from keras_transformer.tokens import BOS_ID, EOS_ID


class GreedySampler(OneOutputSampler):
    """The most likely token at every step: a sampler of `decode` (its
    `narrow_batches` strategies included).

    Args:
        alpha: float >= 0. The score of an output is its log-probability
            (EOS included) over the length penalty of its length, as
            beam search scores (by default with its `ALPHA`); 0 gives the
            plain sum.
        length_penalty: the penalty's kind (`decoding.common.LENGTH_PENALTIES`).
    """

    def choose(self, log_probs, state, step):
        return ops.cast(ops.argmax(log_probs, axis=-1), "int32")

    def get_config(self):
        return {"beam_size": 1, "alpha": self.alpha, "length_penalty": self.length_penalty}

    def __repr__(self):
        return f"GreedySampler(alpha={self.alpha}, length_penalty={self.length_penalty!r})"


def greedy_decode(
    model,
    source_ids,
    max_length=None,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    use_cache=True,
    max_extra_length=MAX_EXTRA_LENGTH,
    narrow_batches=False,
):
    """Decodes `source_ids` by taking the most likely token at each step.

    Scores are the outputs' summed log-probabilities (`GreedySampler` with
    `alpha=0`).

    `decode` with a `GreedySampler`: the loop stops once every sentence has
    produced EOS or reached its length limit, and runs eagerly, under
    `tf.function(jit_compile=True)`, `jax.jit` and on PyTorch.

    Args:
        model: a `Transformer`, or any object with `encode`, `init_cache`
            and `decode` of the same signatures.
        source_ids: int `(batch, source_length)`, padded with 0.
        max_length: int, number of output tokens. `None`: each sentence may
            produce its source length (without padding) + `max_extra_length`
            tokens, capped by the model's `max_length`.
        bos_id: int. First decoder input.
        eos_id: int or `None`. End of sentence; `None` never stops early
            (for benchmarks with a fixed output length).
        use_cache: bool. Decode one token per step with the key/value
            cache, or re-run the full decoder over the buffer every step.
        max_extra_length: int, see `max_length`.
        narrow_batches: `False`, `True` or `"halves"`: what becomes of the
            sentences that are done (`keras_transformer.decoding.loop`).

    Returns:
        `(tokens, scores)`: int32 `(batch, length)`, the output tokens without
        BOS, EOS included, 0 after EOS; and float32 `(batch,)`, the sum of the
        tokens' log-probabilities (EOS included).

    Example:

    >>> model = Transformer.from_architecture("tiny", vocab_size=100)
    >>> tokens, scores = greedy_decode(model, [[5, 6, 7, 3]], max_length=8)
    >>> tokens.shape
    (1, 8)
    """
    return decode(model, source_ids, GreedySampler(alpha=0.0), max_length, bos_id, eos_id, use_cache, max_extra_length,
                  narrow_batches)
