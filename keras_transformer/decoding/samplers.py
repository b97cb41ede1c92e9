"""Samplers: how the decoding chooses its output tokens, as small objects.

A sampler holds its settings and decodes a padded batch of model-ready
source ids: `sampler(model, source_ids, max_extra_length, drop_finished)`
returns `(tokens, scores)` as `beam_search` does. The `Translator` and the
SavedModel export hold one and call it alike.

Example:

>>> sampler = BeamSampler(beam_size=4, alpha=0.6)
>>> tokens, scores = sampler(model, [[5, 6, 7, 3]])
>>> get_sampler(beam_size=1)
GreedySampler()
"""

from keras_transformer.decoding.beam_search import beam_search, check_alpha
from keras_transformer.decoding.defaults import ALPHA, BEAM_SIZE, MAX_EXTRA_LENGTH
from keras_transformer.decoding.greedy import greedy_decode
from keras_transformer.validation import check_positive


class GreedySampler:
    """The most likely token at every step (`greedy_decode`). Its batch
    keeps its rows to the end: `drop_finished` is ignored. Scores are the
    outputs' summed log-probabilities."""

    num_return = 1

    def __call__(self, model, source_ids, max_extra_length=MAX_EXTRA_LENGTH, drop_finished=False):
        return greedy_decode(model, source_ids, max_extra_length=max_extra_length)

    def get_config(self):
        return {"beam_size": 1}

    def __repr__(self):
        return "GreedySampler()"


class BeamSampler:
    """Beam search with the GNMT length penalty (`beam_search`).

    Args:
        beam_size: int >= 1.
        alpha: float >= 0. The length penalty's exponent.
        num_return: int in [1, beam_size]. Hypotheses returned per sentence.
    """

    def __init__(self, beam_size=BEAM_SIZE, alpha=ALPHA, num_return=1):
        check_positive("beam_size", beam_size)
        check_positive("num_return", num_return)
        if num_return > beam_size:
            raise ValueError(f"Argument `num_return` must be at most `beam_size`={beam_size}. Received: {num_return}")
        self.beam_size, self.alpha, self.num_return = beam_size, check_alpha(alpha), num_return

    def __call__(self, model, source_ids, max_extra_length=MAX_EXTRA_LENGTH, drop_finished=False):
        return beam_search(
            model, source_ids, beam_size=self.beam_size, alpha=self.alpha, num_return=self.num_return,
            max_extra_length=max_extra_length, drop_finished=drop_finished,
        )

    def get_config(self):
        return {"beam_size": self.beam_size, "alpha": self.alpha, "num_return": self.num_return}

    def __repr__(self):
        return f"BeamSampler(beam_size={self.beam_size}, alpha={self.alpha}, num_return={self.num_return})"


def get_sampler(beam_size=BEAM_SIZE, alpha=ALPHA, num_return=1):
    """Greedy decoding for `beam_size=1` and one hypothesis, else beam search."""
    if beam_size == 1 and num_return == 1:
        check_alpha(alpha)
        return GreedySampler()
    return BeamSampler(beam_size, alpha, num_return)
