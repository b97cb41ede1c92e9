"""Lexically constrained beam search's bookkeeping
(`keras_transformer.decoding.constraints`) against plain Python written
from its rules: phrase progress, the whole-word rule, and dynamic beam
allocation. The search itself, on a trained model, is in
tests/decoding/test_translator.py."""

import numpy as np
import pytest
from keras import ops

from keras_transformer.decoding import constraints as lexical
from keras_transformer.decoding.common import NEG_INF

pytestmark = pytest.mark.backend  # run on TensorFlow, JAX and PyTorch (tests/run.sh)


def progress_by_hand(phrase, tokens, whole_words, continues=()):
    """The progress of one phrase over `tokens`, step by step: tokens met
    of a phrase not complete; its length when complete and waiting for the
    next token (whole words only); its length + 1 once met."""
    progress, states = 0, []
    for token in tokens:
        if progress >= len(phrase):
            progress = len(phrase) + 1
        elif token == phrase[progress]:
            progress += 1
        else:
            progress = 1 if token == phrase[0] else 0
        if not whole_words and progress == len(phrase):
            progress += 1
        states.append(progress)
    return states


@pytest.mark.parametrize("whole_words", [False, True])
def test_progress_follows_the_rules_written_by_hand(whole_words):
    rng = np.random.default_rng(0)
    phrases = [[5, 6, 7], [5], [6, 6, 7], []]  # the last: padding, met from the start
    constraints = np.zeros((1, len(phrases), 3), "int32")
    for j, phrase in enumerate(phrases):
        constraints[0, j, : len(phrase)] = phrase
    for _ in range(20):
        tokens = rng.choice([5, 6, 7, 8], size=12).tolist()
        progress = lexical.start_progress(constraints, 1)  # (1, 1, constraints)
        lengths = lexical.phrase_lengths(constraints)
        seen = []
        for token in tokens:
            progress = lexical.advance(progress, constraints, lengths, np.array([[token]], "int32"), whole_words)
            seen.append(ops.convert_to_numpy(progress)[0, 0].tolist())
        for j, phrase in enumerate(phrases):
            expected = [1] * len(tokens) if not phrase else progress_by_hand(phrase, tokens, whole_words)
            assert [s[j] for s in seen] == expected, (phrase, tokens)


def test_a_begun_phrase_goes_on_and_a_complete_one_ends_its_word():
    constraints = np.array([[[5, 6, 0], [7, 0, 0]]], "int32")  # (1, 2, 3)
    lengths = lexical.phrase_lengths(constraints)
    # Beams: inside [5, 6]; [7] complete; nothing begun.
    progress = np.array([[[1, 0], [0, 1], [0, 0]]], "int32")
    log_probs = np.zeros((1, 3, 10), "float32")
    going_on = ops.convert_to_numpy(lexical.continue_phrases(log_probs, progress, constraints, lengths))
    assert (going_on[0, 0] == NEG_INF).tolist() == [t != 6 for t in range(10)]
    assert (going_on[0, 1:] == 0).all()
    continues = np.arange(10) >= 8  # tokens 8 and 9 continue a word
    ended = ops.convert_to_numpy(lexical.end_words(log_probs, progress, lengths, continues))
    assert (ended[0, 1] == NEG_INF).tolist() == continues.tolist()
    assert (ended[0, [0, 2]] == 0).all()


def allocation_by_hand(banks, eligible, beam):
    """Turn by turn, the best eligible candidate left in each bank, fullest
    bank first; candidates come best first."""
    queues = {}
    for i, (bank, ok) in enumerate(zip(banks, eligible)):
        if ok:
            queues.setdefault(bank, []).append(i)
    chosen = []
    while len(chosen) < beam and any(queues.values()):
        for bank in sorted(queues, reverse=True):
            if queues[bank] and len(chosen) < beam:
                chosen.append(queues[bank].pop(0))
    return chosen


def test_dynamic_beam_allocation_fills_the_beam_bank_by_bank():
    rng = np.random.default_rng(1)
    batch, m, beam, total = 16, 12, 4, 3
    banks = rng.integers(0, total + 1, size=(batch, m)).astype("int32")
    eligible = rng.random((batch, m)) < 0.8
    chosen = ops.convert_to_numpy(lexical.allocate(banks, np.full((batch,), total, "int32"), eligible, beam, total + 1))
    for b in range(batch):
        expected = allocation_by_hand(banks[b].tolist(), eligible[b].tolist(), beam)
        assert sorted(chosen[b].tolist()[: len(expected)]) == sorted(expected), (banks[b], eligible[b])


def test_candidates_add_each_open_phrases_next_token_and_nothing_for_a_complete_one():
    constraints = np.array([[[5, 6], [7, 0]]], "int32")  # (1, 2, 2)
    lengths = lexical.phrase_lengths(constraints)
    progress = np.array([[[1, 1], [0, 2]]], "int32")  # beam 0: inside [5, 6], [7] complete; beam 1: [7] met
    log_probs = np.log(np.full((1, 2, 10), 0.1, "float32"))
    indices, _, real = lexical.candidate_indices(log_probs, np.zeros((1, 2), "float32"), progress, constraints,
                                                 lengths, 2)
    indices, real = ops.convert_to_numpy(indices)[0], ops.convert_to_numpy(real)[0]
    wanted = [(int(i) // 10, int(i) % 10) for i, r in zip(indices[-4:], real[-4:]) if r]  # (beam, token)
    assert wanted == [(0, 6), (1, 5)]
    assert real[:-4].all() and len(indices) == 2 * 2 + 2 + 2 * 2


def test_a_hypothesis_short_of_room_goes_on_only_with_its_phrases():
    # Phrases [5, 6] and [7]; beams: none met (3 tokens needed), [7] met
    # (2 needed), [5, 6] begun ([6] and [7]: 2 needed), all met.
    constraints = np.array([[[5, 6], [7, 0]]], "int32")
    lengths = lexical.phrase_lengths(constraints)
    progress = np.array([[[0, 0], [0, 2], [1, 0], [3, 2]]], "int32")
    log_probs = np.zeros((1, 4, 10), "float32")
    for tokens_left, expected in ((4, [None, None, None, None]), (3, [{5, 7}, None, None, None]),
                                  (2, [{5, 7}, {5}, {6, 7}, None])):
        limits = np.array([10], "int32")
        masked = ops.convert_to_numpy(lexical.meet_in_time(log_probs, progress, constraints, lengths, 10 - tokens_left,
                                                           limits))
        for beam, allowed in enumerate(expected):
            kept = {t for t in range(10) if masked[0, beam, t] == 0}
            assert kept == (allowed if allowed is not None else set(range(10))), (tokens_left, beam, kept)
