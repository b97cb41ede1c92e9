"""Decoding: samplers (greedy, beam search, random sampling) on one loop
over a model, forced decoding of given outputs, and their defaults.

The `Translator` (`keras_transformer.translation.translator`) holds a model, its
preprocessor and a sampler; `keras_transformer.decoding.samplers` states
the samplers' interface and where each lives.

Example:

>>> get_sampler(beam_size=1, alpha=0.6)
GreedySampler(alpha=0.6, length_penalty='gnmt')
"""

from keras_transformer.decoding.beam_search import (
    BeamSampler,
    BeamState,
    ConstrainedBeamSampler,
    beam_search,
    check_stop,
)
from keras_transformer.decoding.common import LENGTH_PENALTIES, NEG_INF, check_alpha, length_penalty
from keras_transformer.decoding.compile import jit_decoder
from keras_transformer.decoding.defaults import ALPHA, BEAM_SIZE, STOP
from keras_transformer.decoding.greedy import GreedySampler, greedy_decode
from keras_transformer.decoding.loop import decode, reorder_cache
from keras_transformer.decoding.random_sampling import RandomSampler
from keras_transformer.decoding.samplers import OneOutputSampler, Sampler
from keras_transformer.decoding.scoring import force_decode

__all__ = [
    "BeamSampler",
    "BeamState",
    "ConstrainedBeamSampler",
    "GreedySampler",
    "LENGTH_PENALTIES",
    "NEG_INF",
    "OneOutputSampler",
    "RandomSampler",
    "Sampler",
    "beam_search",
    "check_stop",
    "decode",
    "force_decode",
    "get_sampler",
    "greedy_decode",
    "jit_decoder",
    "length_penalty",
    "reorder_cache",
]


def get_sampler(beam_size=BEAM_SIZE, alpha=ALPHA, num_return=1, continues_word=None, stop=STOP,
                length_penalty="gnmt"):
    """Greedy decoding for `beam_size=1` and one hypothesis, else beam
    search (whose terminology constraints are met as whole words given
    `continues_word`, and whose sentences are done by the `stop` rule);
    either scores its outputs with the length penalty `length_penalty` of
    exponent `alpha`. Greedy decoding is done with a sentence at its EOS
    under either rule."""
    if beam_size == 1 and num_return == 1:
        check_stop(stop)
        return GreedySampler(check_alpha(alpha), length_penalty)
    return BeamSampler(beam_size, alpha, num_return, continues_word, stop, length_penalty)
