"""Samplers: how the decoding loop chooses its output tokens.

A sampler holds its settings and the steps of one search over the one
decoding loop (`keras_transformer.decoding.loop`): `GreedySampler`
(`keras_transformer.decoding.greedy`), `BeamSampler`
(`keras_transformer.decoding.beam_search`) and `RandomSampler`
(`keras_transformer.decoding.sampling`). Called as
`sampler(model, source_ids, max_extra_length, drop_finished)`, it decodes a
padded batch of model-ready source ids into `(tokens, scores)`. The
`Translator` and the SavedModel export hold one and call it alike.

Example:

>>> sampler = BeamSampler(beam_size=4, alpha=0.6)
>>> tokens, scores = sampler(model, [[5, 6, 7, 3]])
>>> get_sampler(beam_size=1, alpha=0.6)
GreedySampler(alpha=0.6)
"""

from keras_transformer.decoding.beam_search import BeamSampler, check_alpha
from keras_transformer.decoding.defaults import ALPHA, BEAM_SIZE
from keras_transformer.decoding.greedy import GreedySampler
from keras_transformer.decoding.sampling import RandomSampler

__all__ = ["BeamSampler", "GreedySampler", "RandomSampler", "get_sampler"]


def get_sampler(beam_size=BEAM_SIZE, alpha=ALPHA, num_return=1, continues_word=None):
    """Greedy decoding for `beam_size=1` and one hypothesis, else beam
    search (whose terminology constraints are met as whole words given
    `continues_word`); either scores its outputs with the length penalty
    `alpha`."""
    if beam_size == 1 and num_return == 1:
        return GreedySampler(check_alpha(alpha))
    return BeamSampler(beam_size, alpha, num_return, continues_word)
