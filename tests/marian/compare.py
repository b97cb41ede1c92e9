"""What the Marian tests compare: `transformers`' answers
(`tests/marian/reference.py`) in ours ids, and decoded outputs that may
part only at near ties."""

import json
import os

import numpy as np

from keras_transformer.translation.marian.vocabulary import permutation
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID
from tests import shared


def folder():
    """The shared folder of tests/marian's models and answers."""
    return shared.path("marian")


def reference(name="hf"):
    """`transformers`' answers for the model `name` (`reference.py`): a dict and its arrays."""
    with open(os.path.join(folder(), "reference.json"), encoding="utf-8") as f:
        answers = json.load(f)[name]
    with np.load(os.path.join(folder(), f"{name}.npz")) as arrays:
        return answers, dict(arrays)


def to_ours(model_folder, target=False):
    """`(V,) int` array: our id of each of a Hugging Face folder's ids (its PAD: ours)."""
    name = "target_vocab.json" if target and os.path.isfile(os.path.join(model_folder, "target_vocab.json")) \
        else "vocab.json"
    with open(os.path.join(model_folder, name), encoding="utf-8") as f:
        mapping = json.load(f)
    pieces = sorted(mapping, key=mapping.get)
    pad = len(pieces) - 1
    order = permutation(pieces, dict(eos=0, unk=pieces.index("<unk>"), pad=pad))
    ours = np.zeros(len(pieces), dtype="int64")
    for our_id, their_id in enumerate(order):
        if our_id not in (PAD_ID, BOS_ID):
            ours[their_id] = our_id
    ours[pad] = PAD_ID
    return ours


def their_columns(model_folder):
    """Our ids in the order of the folder's target ids, its PAD last: the
    columns of our logits that are theirs (HF's PAD starts the decoder: our BOS)."""
    return np.concatenate([to_ours(model_folder, target=True)[:-1], [BOS_ID]])


def near_ties(translator, sources, ours, theirs, tolerance):
    """`(equal, bad)`: the count of equal outputs among `ours` and `theirs`
    (our ids of each of `sources`, EOS last where they end), and the others
    unless they part at a near tie: at the first token where they part, the
    model's log-probabilities of the two tokens within `tolerance` (float32
    rounding then chooses)."""
    bad, equal = [], 0
    for source, a, b in zip(sources, ours, theirs):
        if a == b:
            equal += 1
            continue
        k = next(i for i in range(min(len(a), len(b))) if a[i] != b[i]) if a[:len(b)] != b[:len(a)] else None
        if k is None:  # one is a prefix of the other: a length limit
            bad.append((source, a, b))
            continue
        log_probs = [translator.runner.force([source], [row[: k + 1]])[0][k] for row in (a, b)]
        if abs(log_probs[0] - log_probs[1]) > tolerance:
            bad.append((source, a, b, log_probs))
    return equal, bad


def ctranslate2_translator(path):
    """CTranslate2's `Translator` of the model folder `path`, on one
    thread: the test models are small, and more threads mostly wait."""
    import ctranslate2

    return ctranslate2.Translator(path, intra_threads=1)


def ctranslate2_greedy(engine, pieces, limits, to_id):
    """CTranslate2's greedy outputs of source `pieces`, each under its
    output limit (`limits`, EOS counted, as ours): ids by `to_id`, EOS last
    where an output ends before its limit."""
    import collections

    groups, outputs = collections.defaultdict(list), [None] * len(pieces)
    for index, limit in enumerate(limits):
        groups[limit].append(index)
    for limit, indices in groups.items():
        results = engine.translate_batch([pieces[i] for i in indices], beam_size=1, max_decoding_length=limit)
        for index, result in zip(indices, results):
            ids = [to_id(p) for p in result.hypotheses[0]]
            outputs[index] = ids + [EOS_ID] if len(ids) < limit else ids
    return outputs
