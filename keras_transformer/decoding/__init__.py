"""Decoding: samplers (greedy, beam search, random sampling) on one loop
over a model, forced decoding of given outputs, and their defaults.

The `Translator` (`keras_transformer.translator`) holds a model, its
preprocessor and a sampler.
"""

from keras_transformer.decoding.beam_search import BeamSampler, BeamState, beam_search, length_penalty
from keras_transformer.decoding.common import NEG_INF
from keras_transformer.decoding.compile import jit_decoder
from keras_transformer.decoding.greedy import GreedySampler, greedy_decode
from keras_transformer.decoding.loop import decode, reorder_cache
from keras_transformer.decoding.samplers import get_sampler
from keras_transformer.decoding.sampling import RandomSampler
from keras_transformer.decoding.scoring import force_decode

__all__ = [
    "BeamSampler",
    "BeamState",
    "GreedySampler",
    "NEG_INF",
    "RandomSampler",
    "beam_search",
    "decode",
    "force_decode",
    "get_sampler",
    "greedy_decode",
    "jit_decoder",
    "length_penalty",
    "reorder_cache",
]
