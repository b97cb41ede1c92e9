"""Shared fixtures of the data tests: one small tokenizer for the session."""

import pytest

from keras_transformer import datasets
from keras_transformer.data import SubwordTokenizer

TEXTS = [
    "Où est la gare ?", "Il coûte 12,50 € « vraiment ».", "How are you? I'm fine.", "Ça va très bien, merci !",
    "The year 1984 was long.", "Élève, écoute : naïveté, cœur, façade.", "C'est l'été ; il fait 35 °C.",
]


@pytest.fixture(scope="session")
def tokenizer():
    pairs = datasets.load("tatoeba_en_fr", "validation")
    return SubwordTokenizer.train([s for p in pairs for s in p] + TEXTS * 5, vocab_size=2000)
