"""A real tiny Transformer that learned to permute the words of short
sentences, a different permutation for each length: its alignments have a
known answer, and it translates unseen sentences (tests/decoding/test_translator.py,
tests/serving/test_output_paths.py)."""

import fcntl
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
# A folder that tests/run.sh gives every pass (tests/models/test_learning.py).
SHARED = "KERAS_TRANSFORMER_TEST_SHARED"


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


def train_permuting_model():
    """`(model, tokenizer, training sentences, held-out sentences)`: a
    one-layer Transformer that learned the permutations (most of 50
    unseen sentences exactly).

    Under tests/run.sh the first test process to ask trains it and saves it
    in the shared folder; the others, the JAX and PyTorch passes' included,
    wait for it and load it. Their tests check decoding, scoring and
    alignments on their backend with weights TensorFlow learned; training on
    each backend is tests/training's. Run alone, each process trains its own.
    """
    train = sentences(2000, seed=0)
    held_out = [s for s in sentences(120, seed=1) if s not in set(train)][:50]
    targets = [permute(s) for s in train]
    shared = os.environ.get(SHARED)
    if not shared:
        return (*train_copy_model(train, targets=targets, epochs=30, batch_size=64), train, held_out)
    folder = os.path.join(shared, "permuting")
    with open(folder + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not os.path.isdir(folder):
            model, tokenizer = train_copy_model(train, targets=targets, epochs=30, batch_size=64)
            partial = folder + ".partial"
            tokenizer.save(partial)  # makes the folder
            model.save(os.path.join(partial, "model.keras"))
            os.replace(partial, folder)
    return keras.saving.load_model(os.path.join(folder, "model.keras")), SubwordTokenizer.load(folder), train, held_out
