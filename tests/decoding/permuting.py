"""A real tiny Transformer that learned to permute the words of short
sentences, a different permutation for each length: its alignments have a
known answer, and it translates unseen sentences (tests/decoding/test_translator.py,
tests/serving/test_output_paths.py)."""

import os

import keras
import numpy as np

from keras_transformer.data import SubwordTokenizer
from tests.decoding.trained_copy import train_copy_model

# One SentencePiece piece each: a source word is a source piece.
WORDS = "a big small red old cat dog bird fish sees likes chases eats blue".split()
# Target word j is source word PERMUTATIONS[n][j], for a source of n words:
# drawn at random, but none the identity.
PERMUTATIONS = {2: [1, 0], 3: [2, 0, 1], 4: [1, 3, 0, 2], 5: [4, 1, 2, 0, 3]}
# The best translations its SavedModels return (tests/shared.py).
N_BEST = 3
# Its SavedModels' outputs run to a source's length + this many tokens
# (tests/shared.py): under its `max_length` of 32, so that a long input's
# first piece has less room for a target prefix than the whole input.
EXPORT_MAX_EXTRA_LENGTH = 16


def sentences(count, seed):
    """`count` distinct sentences of 2 to 5 words of `WORDS`."""
    rng = np.random.default_rng(seed)
    out = {}
    while len(out) < count:
        out.setdefault(" ".join(rng.choice(WORDS, int(rng.integers(2, 6))).tolist()), None)
    return list(out)


def permute(sentence):
    words = sentence.split()
    return " ".join(words[i] for i in PERMUTATIONS[len(words)])


def training_sentences():
    """`(training sentences, 50 held-out sentences)`."""
    train = sentences(2000, seed=0)
    return train, [s for s in sentences(120, seed=1) if s not in set(train)][:50]


def train_permuting_model():
    """`(model, tokenizer)`: a one-layer Transformer trained on TensorFlow
    to permute the training sentences (it gets most of the 50 held-out
    ones exactly), the recipe of tests/shared.py's `permuting`."""
    train, _ = training_sentences()
    return train_copy_model(train, targets=[permute(s) for s in train], epochs=30, batch_size=64)


def permuting_model():
    """`(model, tokenizer, training sentences, held-out sentences)`: the
    model trained once per test run (tests/shared.py), loaded here. The
    tests of every backend check decoding, scoring and alignments with the
    weights TensorFlow learned; training on each backend is tests/training's."""
    from tests import shared

    folder = shared.path("permuting")
    model = keras.saving.load_model(os.path.join(folder, "model.keras"))
    return (model, SubwordTokenizer.load(folder), *training_sentences())
