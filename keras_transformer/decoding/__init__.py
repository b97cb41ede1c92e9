"""Decoding: greedy, beam search, and a text-to-text `Translator`."""

from keras_transformer.decoding.beam_search import BeamState, beam_search, length_penalty, reorder_cache
from keras_transformer.decoding.common import NEG_INF
from keras_transformer.decoding.compile import jit_decoder
from keras_transformer.decoding.greedy import greedy_decode
from keras_transformer.decoding.translator import Translator

__all__ = [
    "BeamState",
    "NEG_INF",
    "Translator",
    "beam_search",
    "greedy_decode",
    "jit_decoder",
    "length_penalty",
    "reorder_cache",
]
