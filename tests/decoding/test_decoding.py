"""Greedy decoding and beam search against full passes, known answers and
exhaustive search."""

import importlib
import itertools

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import Transformer
from keras_transformer.decoding import NEG_INF, BeamSampler, beam_search, greedy_decode, jit_decoder, length_penalty
from keras_transformer.decoding import common
from keras_transformer.decoding.common import cache_lengths, step_logits
from keras_transformer.tokens import BOS_ID
from tests.decoding.toy_models import EOS, BigramModel, CopyModel

# The decoding loop's module: its batch widths for `narrow_batches="halves"`.
loop = importlib.import_module("keras_transformer.decoding.loop")

# `backend` (tests/run.sh runs those on every backend): the loop's
# backend-specific parts, that is narrowing, top-k and jax.jit, against
# NumPy; TensorFlow's graphs and XLA run in the TensorFlow pass. The rest of
# the search's rules are Python over keras.ops (`portable`: tests/run.sh
# runs them once, on PyTorch); tests/pipeline compares whole translations
# across backends.

TINY = dict(vocab_size=24, num_layers=2, d_model=16, num_heads=2, d_ff=32, dropout_rate=0.0, max_length=32)


def tiny_model(seed=1, num_layers=TINY["num_layers"]):
    """A random `TINY` Transformer from `seed`, built as it is made (a call
    to build it would compile each of its ops on JAX)."""
    keras.utils.set_random_seed(seed)
    return Transformer(**dict(TINY, num_layers=num_layers))


def sources():
    """Three sentences of lengths 3, 6 and 9 (EOS last), 0-padded."""
    batch = np.zeros((3, 9), "int32")
    for row, length in enumerate([3, 6, 9]):
        batch[row, : length - 1] = np.arange(length - 1) % 19 + 4 + row
        batch[row, length - 1] = EOS
    return batch


def np_(x):
    return ops.convert_to_numpy(x)


def normalized(logits):
    logits = np.asarray(logits, "float64")
    return (logits - np.log(np.exp(logits).sum(-1, keepdims=True))).astype("float32")


def table(rows, vocab=9, eps=1e-6):
    """A (vocab, vocab) log-prob table: `rows[prev] = {token: prob}`, the
    remaining mass spread evenly over the other tokens."""
    out = np.zeros((vocab, vocab))
    for prev in range(vocab):
        probs = rows.get(prev, {EOS: 1.0})
        rest = [t for t in range(vocab) if t not in probs]
        spread = max(1.0 - sum(probs.values()), eps * len(rest)) / len(rest)
        for t in range(vocab):
            out[prev, t] = probs.get(t, spread)
    return np.log(out / out.sum(1, keepdims=True)).astype("float32")


# --- cache -----------------------------------------------------------------


@pytest.mark.portable
def test_cached_steps_equal_full_pass_at_every_step():
    model = tiny_model()
    source = sources()
    tokens, _ = greedy_decode(model, source, max_length=8, eos_id=None)
    inputs = np.concatenate([np.full((3, 1), 2, "int32"), np_(tokens)], axis=1)  # BOS + output
    memory = model.encode(source)
    mask = ops.not_equal(source, 0)
    # The full causal pass: position i sees positions <= i only.
    full = np_(model.decode(inputs[:, :8], memory, mask))
    cache = model.init_cache(memory, 8)
    for i in range(8):
        cached, cache = step_logits(model, inputs, ops.convert_to_tensor(i, "int32"), None, mask, cache, 8)
        np.testing.assert_allclose(np_(cached), full[:, i], atol=1e-5)


@pytest.mark.portable
def test_greedy_with_and_without_cache_agree():
    model = tiny_model()
    cached = greedy_decode(model, sources(), max_length=10)
    uncached = greedy_decode(model, sources(), max_length=10, use_cache=False)
    np.testing.assert_array_equal(np_(cached[0]), np_(uncached[0]))
    np.testing.assert_allclose(np_(cached[1]), np_(uncached[1]), atol=1e-5)


@pytest.mark.portable
def test_beam_search_with_and_without_cache_agree():
    # Beams are reordered every step: a wrong cache reordering shows here.
    model = tiny_model()
    kwargs = dict(beam_size=3, max_length=8, num_return=3, eos_id=5)
    cached = beam_search(model, sources(), **kwargs)
    uncached = beam_search(model, sources(), use_cache=False, **kwargs)
    np.testing.assert_array_equal(np_(cached[0]), np_(uncached[0]))
    np.testing.assert_allclose(np_(cached[1]), np_(uncached[1]), atol=1e-5)


@pytest.mark.portable
def test_the_cache_grows_in_segments_and_decoding_equals_the_full_pass(monkeypatch):
    # Segments of 3, 6 and 13 positions (16, 32, ... by default): greedy and
    # beam search over a growing cache equal the uncached full passes, beams
    # reordered across the segments' boundaries included.
    monkeypatch.setattr(common, "FIRST_CACHE_LENGTH", 3)
    model = tiny_model()
    assert cache_lengths(model, 13, True) == (3, 6, 13) and cache_lengths(model, 12, True) == (3, 12)
    assert cache_lengths(model, 3, True) == (3,) and cache_lengths(model, 4, True) == (4,)
    assert cache_lengths(model, 13, False) == (13,) and cache_lengths(CopyModel(), 13, True) == (13,)
    extended = []
    monkeypatch.setattr(model, "extend_cache", lambda cache, n, f=model.extend_cache: extended.append(n) or f(cache, n))
    for fn, kwargs in [(greedy_decode, dict(max_length=13)),
                       (beam_search, dict(beam_size=3, max_length=13, num_return=3, eos_id=5))]:
        del extended[:]
        cached = fn(model, sources(), **kwargs)
        assert extended == [6, 13]
        uncached = fn(model, sources(), use_cache=False, **kwargs)
        np.testing.assert_array_equal(np_(cached[0]), np_(uncached[0]))
        np.testing.assert_allclose(np_(cached[1]), np_(uncached[1]), atol=1e-5)


# The samplers on the one loop, and the rows each of their sentences takes.
SAMPLERS = {"beam": (beam_search, dict(beam_size=3, num_return=3), 3), "greedy": (greedy_decode, {}, 1)}
# Greedy decoding without EOS only: each sentence then runs to its limit,
# the case whose rows the tests know step by step.
SAMPLER_CASES = [(5, "beam"), (None, "beam"), (None, "greedy")]
# The TensorFlow graphs of the cases: beam search with EOS on a dynamic
# batch of a known width, as in the SavedModel; greedy decoding without EOS
# on one of any width, as in the Translator (whose buffer is the width the
# sources have when the graph runs, + max_extra_length).
GRAPH_SHAPES = {(5, "beam"): (None, 9), (None, "greedy"): (None, None)}


@pytest.mark.backend
@pytest.mark.parametrize("eos_id, sampler", SAMPLER_CASES)
def test_finished_sentences_leave_the_batch_at_the_step_they_are_done(monkeypatch, eos_id, sampler):
    # Length limits 3, 6 and 9 (no extra length). Without EOS each sentence
    # is done at its limit: step 0 runs on a row a sentence, then 3
    # sentences x 3 beams (or 1 greedy row) decode 2 steps, 2 sentences 3
    # steps, then 1 sentence 3 steps. The outputs are those of the whole
    # batch decoded together, eagerly and, on TensorFlow, in the graphs of
    # `GRAPH_SHAPES`. JAX refuses before it reads the model.
    monkeypatch.setattr(common, "FIRST_CACHE_LENGTH", 3)
    decode, kwargs, width = SAMPLERS[sampler]
    kwargs = dict(kwargs, max_extra_length=0, eos_id=eos_id)
    if keras.backend.backend() == "jax":
        with pytest.raises(ValueError, match="narrow_batches"):
            decode(CopyModel(), sources(), narrow_batches=True, **kwargs)
        return
    model = tiny_model()
    expected = decode(model, sources(), **kwargs)
    rows = []
    monkeypatch.setattr(model, "decode", lambda ids, *a, f=model.decode, **kw: rows.append(ids.shape[0]) or f(ids, *a, **kw))
    dropped = decode(model, sources(), narrow_batches=True, **kwargs)
    assert rows[0] == 3 and rows[1:] == sorted(rows[1:], reverse=True), rows
    assert set(rows[1:]) <= {3 * width, 2 * width, width}, rows
    if eos_id is None:
        assert rows == [3] + [3 * width] * 2 + [2 * width] * 3 + [width] * 3, rows
    np.testing.assert_array_equal(np_(dropped[0]), np_(expected[0]))
    np.testing.assert_allclose(np_(dropped[1]), np_(expected[1]), atol=1e-6)
    if keras.backend.backend() == "tensorflow" and (eos_id, sampler) in GRAPH_SHAPES:
        import tensorflow as tf

        graph = tf.function(lambda s: decode(model, s, narrow_batches=True, **kwargs), autograph=False,
                            input_signature=[tf.TensorSpec(GRAPH_SHAPES[eos_id, sampler], tf.int32)])
        tokens, scores = graph(sources())
        np.testing.assert_array_equal(np_(tokens), np_(expected[0]))
        np.testing.assert_allclose(np_(scores), np_(expected[1]), atol=1e-6)


@pytest.mark.backend
def test_top_k_in_blocks_gives_numpys_largest_values_ties_to_the_lower_index():
    # A beam step's candidates: 2 * beam of beam * vocab, in blocks; values
    # drawn from a few integers tie often, and across blocks.
    rng = np.random.default_rng(0)
    # Two equal values whose blocks' maxima differ: the one in the block of
    # the lower maximum comes first along the axis, and so first here.
    tie = np.full((1, 20000), -100.0)
    tie[0, [0, 50, 51, 900, 2000, 5000, 9000, 19999]] = [3, 9, 3, 8, 7, 6, 5, 4]
    cases = [(x.astype("float32"), k) for x, k in (
        (rng.normal(size=(5, 20000)), 8), (rng.integers(-5, 5, size=(5, 20000)), 8),
        (rng.integers(-3, 3, size=(5, 32000)), 6), (rng.normal(size=(5, 17)), 3), (tie, 8))]
    for x, k in cases:
        expected = np.argsort(-x, axis=1, kind="stable")[:, :k]
        got_values, got_indices = (np_(t) for t in common.top_k(x, k))
        np.testing.assert_array_equal(got_values, np.take_along_axis(x, expected, axis=1))
        if keras.backend.backend() != "torch":  # PyTorch's topk orders equal values as it likes
            np.testing.assert_array_equal(got_indices, expected)


@pytest.mark.portable
def test_batch_widths_halve_twice_down_to_the_narrowest():
    assert loop.NARROWEST_WIDTH == 8
    assert loop.batch_widths(64) == [64, 32, 16]
    assert loop.batch_widths(40) == [40, 20, 10]
    assert loop.batch_widths(16) == [16, 8]
    assert loop.batch_widths(12) == [12]  # its half is narrower than 8
    assert loop.batch_widths(9) == [9] and loop.batch_widths(8) == [8] and loop.batch_widths(1) == [1]


def sources_of_lengths(lengths):
    """Sources `(len(lengths), max(lengths))`, each of its length with EOS, padded with 0."""
    source = np.zeros((len(lengths), max(lengths)), "int32")
    for row, length in enumerate(lengths):
        source[row, : length - 1] = np.arange(length - 1) % 19 + 4 + row
        source[row, length - 1] = EOS
    return source


# Beam search without EOS on every backend (`backend`): jax.jit's narrowing
# is tested only here. The other cases once (`portable`).
@pytest.mark.parametrize("eos_id, sampler", [
    pytest.param(*case, marks=pytest.mark.backend if case == (None, "beam") else pytest.mark.portable)
    for case in SAMPLER_CASES])
def test_halves_narrow_the_batch_and_decode_as_the_whole_batch(monkeypatch, eos_id, sampler):
    # Four sentences with length limits 5, 2, 9 and 3 (no extra length),
    # segments of 3 and 9 positions, widths of 4, 2 and 1 sentences.
    # Without EOS each sentence is done at its limit: step 0 runs on a row a
    # sentence, 4 sentences x 3 beams (or 1 greedy row) decode steps 1-2
    # (the second sentence done after step 1, three still decoding), 2
    # sentences steps 3-4, then 1 sentence steps 5-8. Each sentence's outputs
    # and scores are those of the whole batch decoded together (on JAX
    # compiled as well, where each eager op would compile on its own),
    # narrowed eagerly and compiled. A one-layer model: each width is
    # another copy of its step to compile (a cache of several layers: the
    # tests above).
    monkeypatch.setattr(common, "FIRST_CACHE_LENGTH", 3)
    monkeypatch.setattr(loop, "NARROWEST_WIDTH", 1)
    model = tiny_model(num_layers=1)
    source = sources_of_lengths([5, 2, 9, 3])
    decode, kwargs, width = SAMPLERS[sampler]
    kwargs = dict(kwargs, max_extra_length=0, eos_id=eos_id)
    if keras.backend.backend() == "jax":
        expected = jit_decoder(model, decode, **kwargs)(source)
    else:
        expected = decode(model, source, **kwargs)
    rows = []
    monkeypatch.setattr(model, "decode", lambda ids, *a, f=model.decode, **kw: rows.append(ids.shape[0]) or f(ids, *a, **kw))
    compile_narrowed = jit_decoder(model, decode, narrow_batches="halves", **kwargs)
    if keras.backend.backend() == "jax":
        # JAX's loops keep their shapes: the narrowed run is the compiled
        # one, which traces the step for every width, once per segment.
        compiled = compile_narrowed(source)
        assert sorted(rows) == sorted([4, width, width, 2 * width, 2 * width, 4 * width, 4 * width]), rows
    else:  # one decoding step after the other
        narrowed = decode(model, source, narrow_batches="halves", **kwargs)
        np.testing.assert_array_equal(np_(narrowed[0]), np_(expected[0]))
        np.testing.assert_allclose(np_(narrowed[1]), np_(expected[1]), atol=1e-6)
        assert rows[0] == 4 and rows[1:] == sorted(rows[1:], reverse=True), rows
        assert set(rows[1:]) <= {4 * width, 2 * width, width}, rows
        if eos_id is None:
            assert rows == [4] + [4 * width] * 2 + [2 * width] * 2 + [width] * 4, rows
        if keras.backend.backend() == "tensorflow":
            return  # XLA's narrowing: the test below, and tests/export/test_xla_export.py
        compiled = compile_narrowed(source)
    np.testing.assert_array_equal(np_(compiled[0]), np_(expected[0]))
    np.testing.assert_allclose(np_(compiled[1]), np_(expected[1]), atol=1e-5)


def test_halves_with_a_batch_size_known_only_when_the_graph_runs(monkeypatch):
    # The SavedModel exported with XLA traces its beam search for any batch
    # size: the widths are then `batch`, `batch // 2` and `batch // 4` as
    # tensors. Same sentences, model and expected row counts as above, in a
    # graph without XLA (each step's rows recorded as it runs) and with it;
    # the loop in one segment of 9 positions (narrowing over segments: the
    # test above, and with XLA tests/export/test_xla_export.py).
    tf = pytest.importorskip("tensorflow")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("TensorFlow graphs")
    monkeypatch.setattr(common, "FIRST_CACHE_LENGTH", 9)
    monkeypatch.setattr(loop, "NARROWEST_WIDTH", 1)
    model = tiny_model(num_layers=1)
    source = sources_of_lengths([5, 2, 9, 3])
    kwargs = dict(beam_size=3, num_return=3, max_extra_length=0, eos_id=None)
    expected = beam_search(model, source, **kwargs)
    traced, ran, plain = [], [], model.decode

    def decode(ids, *args, **kw):
        traced.append(ids.shape[0])
        tf.numpy_function(lambda n: ran.append(int(n)) or np.int32(0), [tf.shape(ids)[0]], tf.int32)
        return plain(ids, *args, **kw)

    monkeypatch.setattr(model, "decode", decode)
    spec = [tf.TensorSpec((None, 9), tf.int32)]
    graph = tf.function(lambda s: beam_search(model, s, narrow_batches="halves", **kwargs), autograph=False,
                        input_signature=spec)
    tokens, scores = graph(source)
    assert traced == [None] * 4, traced  # step 0, then three widths
    assert ran == [4] + [12] * 2 + [6] * 2 + [3] * 4, ran
    np.testing.assert_array_equal(np_(tokens), np_(expected[0]))
    np.testing.assert_allclose(np_(scores), np_(expected[1]), atol=1e-6)

    monkeypatch.setattr(model, "decode", plain)
    xla = tf.function(lambda s: beam_search(model, s, narrow_batches="halves", **kwargs), autograph=False,
                      input_signature=spec, jit_compile=True)
    # A sentence alone: its widths 1, 0 and 0 (XLA's narrowing of a whole
    # batch: tests/export/test_xla_export.py).
    tokens, scores = xla(source[:1])
    np.testing.assert_array_equal(np_(tokens), np_(expected[0])[:1])
    np.testing.assert_allclose(np_(scores), np_(expected[1])[:1], atol=1e-5)


@pytest.mark.portable
@pytest.mark.parametrize("value", ["yes", 1, None])
def test_narrow_batches_takes_false_true_or_halves(value):
    with pytest.raises(ValueError, match="narrow_batches"):
        beam_search(tiny_model(), sources(), narrow_batches=value)


@pytest.mark.portable
def test_extend_cache_pads_the_self_attention_part_with_zeros():
    model = tiny_model()
    source = sources()
    memory = model.encode(source)
    mask = ops.not_equal(source, 0)
    cache = model.init_cache(memory, 4)
    for i in range(3):
        _, cache = step_logits(model, np.full((3, 4), 7, "int32"), ops.convert_to_tensor(i, "int32"), None, mask, cache, 4)
    longer = model.extend_cache(cache, 9)
    for pair, longer_pair in zip(cache["self_attention"], longer["self_attention"]):
        assert len(pair) == len(longer_pair) == 2  # (key, value), each (batch, heads, length, d_k)
        for before, after in zip(pair, longer_pair):
            before, after = np_(before), np_(after)
            assert after.shape == before.shape[:2] + (9,) + before.shape[3:]
            np.testing.assert_array_equal(after[:, :, :4], before)
            assert not after[:, :, 4:].any() and before[:, :, :3].any()
    assert longer["cross_attention"] is cache["cross_attention"]
    with pytest.raises(ValueError, match="max_length"):
        model.extend_cache(longer, 5)


# --- greedy ------------------------------------------------------------------


@pytest.mark.portable
def test_greedy_output_format_and_scores():
    model = tiny_model()
    source = sources()
    tokens, scores = greedy_decode(model, source, eos_id=7)
    tokens, scores = np_(tokens), np_(scores)
    assert tokens.shape == (3, min(9 + 50, TINY["max_length"]))
    memory, mask = model.encode(source), ops.not_equal(source, 0)
    for row in range(3):
        out = list(tokens[row])
        end = out.index(7) + 1 if 7 in out else len(out)
        assert all(t == 0 for t in out[end:])  # 0 after EOS
        inputs = np.array([[2] + out[: end - 1]], "int32")
        log_probs = normalized(np_(model.decode(inputs, memory[row : row + 1], mask[row : row + 1]))[0])
        assert list(log_probs.argmax(-1)) == out[:end]
        np.testing.assert_allclose(scores[row], log_probs[np.arange(end), out[:end]].sum(), rtol=1e-4)


@pytest.mark.portable
def test_default_length_is_source_length_plus_extra_capped_by_model():
    model = tiny_model()
    short = np.array([[5, 6, EOS]], "int32")
    tokens, _ = greedy_decode(model, short, eos_id=None, max_extra_length=4)
    assert np_(tokens).shape == (1, 7)
    # No early stop: each of the 7 tokens is the arg-max of a full decoder
    # pass over the ones before it (a random model may well pick id 0).
    # Every pass has one shape, BOS and 7 slots (eager JAX compiles each new
    # shape); causal attention keeps the slots after `step` from acting on it.
    memory, prefix = model.encode(short), np.zeros((1, 8), "int32")
    prefix[0, 0] = BOS_ID
    for step in range(7):
        logits = model.decode(prefix, memory, short != 0)
        prefix[0, step + 1] = int(np.argmax(np_(logits)[0, step]))
    assert np_(tokens)[0].tolist() == prefix[0, 1:].tolist()
    tokens, _ = greedy_decode(model, short, eos_id=None)  # 3 + 50 > 32
    assert np_(tokens).shape == (1, TINY["max_length"])


# --- beam search -------------------------------------------------------------


@pytest.mark.portable
@pytest.mark.parametrize("eos_id", [3, 9])
def test_beam_size_one_is_greedy(eos_id):
    model = tiny_model(seed=2)
    greedy = greedy_decode(model, sources(), max_length=12, eos_id=eos_id)
    beam = beam_search(model, sources(), beam_size=1, alpha=0.0, max_length=12, eos_id=eos_id)
    np.testing.assert_array_equal(np_(beam[0]), np_(greedy[0]))
    np.testing.assert_allclose(np_(beam[1]), np_(greedy[1]), atol=1e-5)


@pytest.mark.portable
def test_beam_search_finds_what_greedy_misses():
    # a: 0.6 then EOS at best 0.3 (0.18); b: 0.4 then EOS 0.95 (0.38).
    a, b = 4, 5
    log_probs = table({2: {a: 0.6, b: 0.4}, a: {EOS: 0.3, 6: 0.25, 7: 0.25, 8: 0.2}, b: {EOS: 0.95}})
    model = BigramModel(log_probs)
    source = np.array([[5, EOS]], "int32")
    greedy, greedy_score = greedy_decode(model, source, max_length=6)
    assert list(np_(greedy)[0]) == [a, EOS, 0, 0, 0, 0]
    np.testing.assert_allclose(np_(greedy_score), [np.log(0.18)], rtol=1e-5)
    tokens, scores = beam_search(model, source, beam_size=2, alpha=0.0, max_length=6)
    assert list(np_(tokens)[0]) == [b, EOS, 0, 0, 0, 0]
    np.testing.assert_allclose(np_(scores), [np.log(0.38)], rtol=1e-5)


def exhaustive(log_probs, length, alpha):
    """Every hypothesis (ending in EOS, or of `length` tokens), best first."""
    vocab = log_probs.shape[0]
    found = []
    for n in range(1, length + 1):
        for seq in itertools.product(range(vocab), repeat=n):
            if EOS in seq[:-1] or (n < length and seq[-1] != EOS):
                continue
            total = sum(log_probs[p, t] for p, t in zip((2,) + seq[:-1], seq))
            found.append((total / ((5 + n) / 6) ** alpha, list(seq) + [0] * (length - n)))
    return sorted(found, key=lambda x: -x[0])


@pytest.mark.backend
@pytest.mark.parametrize("seed, alpha", [(0, 0.0), (1, 0.6), (2, 2.0)])
def test_wide_beam_equals_exhaustive_search(seed, alpha):
    # 4 tokens, 3 steps: a beam of 36 holds every candidate, so beam search
    # with its finished pool, length penalty and exact stop rule is exact.
    log_probs = normalized(np.random.default_rng(seed).normal(size=(4, 4)) * 2)
    model = BigramModel(log_probs)
    tokens, scores = beam_search(
        model, np.array([[1, EOS]], "int32"), beam_size=36, alpha=alpha, max_length=3, num_return=5, stop="exact"
    )
    best = exhaustive(log_probs, 3, alpha)[:5]
    np.testing.assert_allclose(np_(scores)[0], [s for s, _ in best], rtol=1e-5)
    assert np_(tokens)[0].tolist() == [seq for _, seq in best]


@pytest.mark.portable
def test_length_penalty_decides_between_short_and_long_hypotheses():
    # short: a EOS (2 tokens, log p_s); long: b c d e EOS (5 tokens, log p_l
    # < log p_s). The long one wins iff p_l / lp(5) > p_s / lp(2), i.e.
    # alpha > log(p_l / p_s) / log(lp(5) / lp(2)) with lp(n) = (5 + n) / 6.
    log_probs = table({2: {4: 0.6, 5: 0.4}, 4: {EOS: 0.999}, 5: {6: 0.999}, 6: {7: 0.999}, 7: {8: 0.999}, 8: {EOS: 0.999}})
    model = BigramModel(log_probs)
    p_short = log_probs[2, 4] + log_probs[4, EOS]
    p_long = log_probs[2, 5] + log_probs[5, 6] + log_probs[6, 7] + log_probs[7, 8] + log_probs[8, EOS]
    crossover = np.log(p_long / p_short) / np.log(10 / 7)
    assert 0.5 < crossover < 2
    source = np.array([[5, EOS]], "int32")
    for alpha, expected, length, log_p in [
        (0.0, [4, EOS], 2, p_short),
        (crossover - 0.05, [4, EOS], 2, p_short),
        (crossover + 0.05, [5, 6, 7, 8, EOS], 5, p_long),
    ]:
        tokens, scores = beam_search(model, source, beam_size=2, alpha=alpha, max_length=8, stop="exact")
        assert list(np_(tokens)[0][: len(expected)]) == expected
        np.testing.assert_allclose(np_(scores)[0], log_p / ((5 + length) / 6) ** alpha, rtol=1e-5)
    np.testing.assert_allclose(np_(length_penalty(np.array([2, 5]), 0.6)), [(7 / 6) ** 0.6, (10 / 6) ** 0.6], rtol=1e-6)


def reference_beam_search(log_probs, beam, alpha, length, num_return, stop):
    """One sentence's beam search over a bigram table, written out in Python
    from `decoding.beam_search`'s docstring: the best `2 * beam` candidates
    by log-probability, those within the first `beam` that end in EOS (or
    reach the length limit) finished with GNMT's penalty, the best `beam`
    others alive; done under `stop` ("exact": no alive hypothesis can beat
    the `num_return`-th finished one; "early": a step's best candidate has
    ended and `num_return` have finished). `(tokens, scores)` of the
    `num_return` best, padded with 0."""
    penalty = lambda n: ((5 + n) / 6) ** alpha  # noqa: E731
    vocab = log_probs.shape[0]
    alive, finished, top_ended = [((), np.float32(0))], [], False
    for step in range(length):
        enough = len(finished) >= num_return
        if stop == "early" and enough and top_ended:
            break
        if stop == "exact" and enough and finished[num_return - 1][0] >= alive[0][1] / penalty(length):
            break
        candidates = sorted(
            ((np.float32(p + log_probs[seq[-1] if seq else BOS_ID, t]), b * vocab + t, seq + (t,))
             for b, (seq, p) in enumerate(alive) for t in range(vocab)),
            key=lambda c: (-c[0], c[1]))[: 2 * beam]
        for rank, (p, _, seq) in enumerate(candidates[:beam]):
            if seq[-1] == EOS or step + 1 == length:
                finished.append((p / penalty(step + 1), seq))
                top_ended = top_ended or rank == 0
        finished = sorted(finished, key=lambda f: -f[0])[:beam]
        alive = [(seq, p) for p, _, seq in candidates if seq[-1] != EOS][:beam]
    best = finished[:num_return]
    return [list(seq) + [0] * (length - len(seq)) for _, seq in best], [score for score, _ in best]


# (seed, beam, alpha, num_return) of random bigram tables: the first four
# where the stop rules return different n-best lists, then three where a
# hypothesis ends below the best candidate a step or more before the best
# candidate ends (the early rule waits for that).
STOP_RULE_CASES = [(0, 2, 2.0, 2), (1, 2, 0.6, 2), (4, 3, 2.0, 2), (11, 3, 0.6, 2), (21, 2, 0.6, 1), (3, 3, 0.0, 2),
                   (22, 2, 2.0, 1)]


@pytest.mark.portable
def test_both_stop_rules_equal_a_search_written_out_in_python():
    # Tables whose EOS is likely enough that hypotheses end at different
    # steps; each rule, on the loop that keeps the batch and on the one that
    # drops each sentence when done, against the Python search.
    differ = 0
    for seed, beam, alpha, num_return in STOP_RULE_CASES:
        logits = np.random.default_rng(seed).normal(size=(8, 8)) * 2
        logits[:, EOS] += 1.5
        log_probs = normalized(logits)
        expected = {stop: reference_beam_search(log_probs, beam, alpha, 6, num_return, stop)
                    for stop in ("exact", "early")}
        differ += expected["exact"][0] != expected["early"][0]
        for stop, narrow in itertools.product(expected, (False, True) if keras.backend.backend() != "jax" else (False,)):
            tokens, scores = beam_search(BigramModel(log_probs), np.array([[1, EOS]], "int32"), beam_size=beam,
                                         alpha=alpha, max_length=6, num_return=num_return, stop=stop,
                                         narrow_batches=narrow)
            tokens, scores = np_(tokens)[0].reshape(num_return, 6), np_(scores)[0].reshape(num_return)
            assert tokens.tolist() == expected[stop][0], (seed, stop, narrow)
            np.testing.assert_allclose(scores, expected[stop][1], rtol=1e-5)
    assert differ == 4


@pytest.mark.portable
def test_the_early_stop_returns_the_hypothesis_that_ends_first_as_the_best():
    # The table of the length penalty test: with alpha above the crossover
    # the long hypothesis wins, and the exact rule finds it; at step 2 the
    # best candidate is the short one's EOS, where the early rule (the
    # default) stops.
    log_probs = table({2: {4: 0.6, 5: 0.4}, 4: {EOS: 0.999}, 5: {6: 0.999}, 6: {7: 0.999}, 7: {8: 0.999}, 8: {EOS: 0.999}})
    source = np.array([[5, EOS]], "int32")
    exact = beam_search(BigramModel(log_probs), source, beam_size=2, alpha=2.0, max_length=8, stop="exact")
    early = beam_search(BigramModel(log_probs), source, beam_size=2, alpha=2.0, max_length=8)  # the default
    assert list(np_(exact[0])[0][:5]) == [5, 6, 7, 8, EOS]
    assert list(np_(early[0])[0][:2]) == [4, EOS] and not np_(early[0])[0][2:].any()
    p_short = log_probs[2, 4] + log_probs[4, EOS]
    np.testing.assert_allclose(np_(early[1])[0], p_short / (7 / 6) ** 2.0, rtol=1e-5)


@pytest.mark.portable
def test_no_hypothesis_scores_zero_as_in_greedy():
    model = Transformer(vocab_size=30, num_layers=1, d_model=16, num_heads=2, d_ff=24, max_length=40)
    source = np.array([[0, 0, 0, 0], [5, 6, 3, 0]], "int32")  # the first row allows 0 tokens
    _, greedy_scores = greedy_decode(model, source, max_extra_length=0)
    tokens, scores = beam_search(model, source, beam_size=3, max_extra_length=0)
    _, n_best_scores = beam_search(model, source, beam_size=3, num_return=3, max_extra_length=0)
    assert float(ops.convert_to_numpy(greedy_scores)[0]) == 0.0
    assert float(ops.convert_to_numpy(scores)[0]) == 0.0
    assert ops.convert_to_numpy(n_best_scores)[0].tolist() == [0.0, NEG_INF, NEG_INF]  # one empty hypothesis
    assert not ops.convert_to_numpy(tokens)[0].any()
    assert float(ops.convert_to_numpy(scores)[1]) < 0  # a real hypothesis keeps its score


@pytest.mark.portable
def test_n_best_is_sorted_and_distinct():
    model = tiny_model(seed=3)
    tokens, scores = beam_search(model, sources(), beam_size=4, num_return=4, max_length=6, eos_id=5)
    tokens, scores = np_(tokens), np_(scores)
    assert tokens.shape == (3, 4, 6) and scores.shape == (3, 4)
    assert np.all(np.diff(scores, axis=1) <= 0) and np.all(scores > NEG_INF / 2)
    for row in tokens:
        assert len({tuple(h) for h in row}) == 4


@pytest.mark.portable
@pytest.mark.parametrize("decoder", ["greedy", "beam"])
def test_sentence_decodes_alike_alone_and_in_a_batch(decoder):
    # Each sentence may produce its own length + 4 tokens: 7, 10 and 13 of
    # the batch's 13 (the model's cap of 32 would give every one 32, and the
    # zeros after a sentence's own limit would go unchecked).
    model = tiny_model(seed=4)
    batch = sources()
    kwargs = dict(max_extra_length=4) if decoder == "greedy" else dict(max_extra_length=4, beam_size=3)
    decode = greedy_decode if decoder == "greedy" else beam_search
    tokens, scores = map(np_, decode(model, batch, **kwargs))
    assert tokens.shape == (3, 13)
    for row, length in enumerate([3, 6, 9]):
        alone_tokens, alone_scores = map(np_, decode(model, batch[row : row + 1, :length], **kwargs))
        n = alone_tokens.shape[1]
        assert n == length + 4
        np.testing.assert_array_equal(tokens[row, :n], alone_tokens[0])
        assert np.all(tokens[row, n:] == 0)
        np.testing.assert_allclose(scores[row], alone_scores[0], atol=1e-4)


@pytest.mark.portable
def test_copy_model_batch_of_different_lengths():
    model = CopyModel()
    source = np.array([[4, 5, 6, 7, EOS], [8, EOS, 0, 0, 0]], "int32")
    for tokens, _ in (greedy_decode(model, source), beam_search(model, source, beam_size=3)):
        tokens = np_(tokens)
        assert tokens[0, :5].tolist() == [4, 5, 6, 7, EOS] and np.all(tokens[0, 5:] == 0)
        assert tokens[1, :2].tolist() == [8, EOS] and np.all(tokens[1, 2:] == 0)


# --- compiled ------------------------------------------------------------------


@pytest.mark.slow  # XLA compiles greedy decoding
@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.function(jit_compile=True) test")
def test_xla_compiled_tf_function_matches_eager(monkeypatch):
    # The loop in two segments (3 and 8 positions): compiled code extends
    # the cache between two loops. Beam search under XLA: the halves test
    # above and the XLA export (tests/export/test_xla_export.py). Under
    # jax.jit: the halves test above and the Translator's tests
    # (tests/decoding/test_translator.py: its decoding on JAX is jax.jit's,
    # against decoding by hand and eager decoding).
    monkeypatch.setattr(common, "FIRST_CACHE_LENGTH", 3)
    model, source = tiny_model(), sources()
    eager = greedy_decode(model, source, max_length=8)
    compiled = jit_decoder(model, greedy_decode, max_length=8)(source)
    np.testing.assert_array_equal(np_(compiled[0]), np_(eager[0]))
    np.testing.assert_allclose(np_(compiled[1]), np_(eager[1]), atol=1e-4)


# --- arguments -----------------------------------------------------------------


@pytest.mark.portable
@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(beam_size=0), "beam_size"),
        (dict(beam_size=2.5), "beam_size"),
        (dict(alpha=-0.1), "alpha"),
        (dict(alpha="high"), "alpha"),
        (dict(num_return=5), "num_return"),
        (dict(max_length=0), "max_length"),
        (dict(max_length=100), "max_length"),
        (dict(eos_id=-1), "eos_id"),
        (dict(stop="soon"), "stop"),
    ],
)
def test_bad_arguments_raise(kwargs, name):
    model = CopyModel()
    with pytest.raises(ValueError, match=name):
        beam_search(model, np.array([[4, EOS]], "int32"), **kwargs)


@pytest.mark.portable
@pytest.mark.parametrize("ids", [np.array([[4.0, 3.0]]), [[4, 3.5]], np.array([4, 3]), [[-4, 3]]])
def test_bad_source_ids_raise(ids):
    model = CopyModel()
    for fn in (greedy_decode, beam_search):
        with pytest.raises(ValueError, match="source_ids"):
            fn(model, ids)


@pytest.mark.portable
def test_suppressed_ids_are_never_output_and_the_other_tokens_share_their_probability():
    """An imported model's `suppressed_ids` (PAD and BOS): the likeliest
    tokens here, never output by greedy decoding or beam search, whose
    scores are the log-probabilities over the other tokens."""
    a = 4
    log_probs = table({2: {0: 0.5, 2: 0.2, a: 0.2, EOS: 0.1}, a: {0: 0.5, 2: 0.2, EOS: 0.25, a: 0.05}})
    model = BigramModel(log_probs)
    model.transformer_config.suppressed_ids = (0, 2)
    source = np.array([[5, EOS]], "int32")
    kept = np.exp(log_probs).copy()
    kept[:, [0, 2]] = 0.0
    renormalized = np.log(kept / kept.sum(1, keepdims=True))
    tokens, score = greedy_decode(model, source, max_length=4)
    assert list(np_(tokens)[0]) == [a, EOS, 0, 0]
    np.testing.assert_allclose(np_(score), [renormalized[2, a] + renormalized[a, EOS]], rtol=1e-5)
    tokens, scores = beam_search(model, source, beam_size=3, alpha=0.0, max_length=4, num_return=3)
    assert not set(np_(tokens)[0][:, 0].tolist()) & {0, 2}
    model.transformer_config.suppressed_ids = ()
    assert list(np_(greedy_decode(model, source, max_length=4)[0])[0]) == [0, EOS, 0, 0]  # PAD, unsuppressed


@pytest.mark.portable
def test_hugging_faces_length_penalty_divides_by_a_power_of_the_length():
    assert float(np_(length_penalty(7, 1.0, "huggingface"))) == pytest.approx(7.0)
    assert float(np_(length_penalty(9, 0.5, "huggingface"))) == pytest.approx(3.0)
    assert float(np_(length_penalty(7, 1.0))) == pytest.approx(2.0)  # GNMT's (5 + 7) / 6
    a = 4
    log_probs = table({2: {a: 0.9, EOS: 0.1}, a: {EOS: 0.9}})
    model = BigramModel(log_probs)
    _, score = beam_search(model, np.array([[5, EOS]], "int32"), beam_size=2, alpha=1.0, max_length=4,
                           length_penalty="huggingface")
    np.testing.assert_allclose(np_(score), [(log_probs[2, a] + log_probs[a, EOS]) / 2], rtol=1e-5)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(model, np.array([[5, EOS]], "int32"), length_penalty="hf")


def hugging_face_beam_search(log_probs, beam_size, alpha, max_length, start=BOS_ID):
    """transformers' `GenerationMixin._beam_search` (its defaults,
    `early_stopping=False`) for one sentence of a bigram table, in Python:
    the best `(score, tokens)`, tokens after the start token, up to EOS or
    `max_length` of them."""
    vocab, k = log_probs.shape[0], beam_size
    running = [([start], 0.0)] + [([start], -1e9)] * (k - 1)
    finished = [(-1e9, None)] * k  # (score, tokens), best first
    improvable, length = True, 1  # tokens so far, the start token's included
    while True:
        candidates = sorted(((score + log_probs[seq[-1], t], seq + [t]) for seq, score in running
                             for t in range(vocab)), key=lambda c: -c[0])[: 2 * k]
        hits = [seq[-1] == EOS or length + 1 > max_length for _, seq in candidates]
        new = [(score / length**alpha, seq) for i, ((score, seq), hit) in enumerate(zip(candidates, hits))
               if hit and i < k and improvable]
        finished = sorted(finished + new, key=lambda c: -c[0])[:k]
        running = [(seq, score) for (score, seq), hit in sorted(zip(candidates, hits), key=lambda c: -(c[0][0] - 1e9 * c[1]))
                   if not hit][:k]
        length += 1
        full = all(seq is not None for _, seq in finished)
        best_now = running[0][1] / (length - 1) ** alpha if running else -1e9
        improvable = improvable and (not full or best_now > finished[-1][0])
        if not improvable or all(hits) or not running:
            score, seq = finished[0]
            return score, seq[1:]


@pytest.mark.portable
@pytest.mark.parametrize("seed", range(12))
def test_beam_search_in_hugging_faces_mode_is_transformers_beam_search(seed):
    """`length_penalty="huggingface"` searches as transformers' beam search
    does (a Python transcription of it above): its score, `length ** alpha`,
    and its rule for stopping, on random bigram tables where EOS is likely."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(6, 6)) * 2
    logits[:, EOS] += 1.5
    log_probs = normalized(logits)
    model = BigramModel(log_probs)
    score, expected = hugging_face_beam_search(log_probs, beam_size=3, alpha=1.0, max_length=6)
    tokens, scores = beam_search(model, np.array([[5, EOS]], "int32"), beam_size=3, alpha=1.0, max_length=6,
                                 length_penalty="huggingface")
    assert [t for t in np_(tokens)[0].tolist()][: len(expected)] == expected
    np.testing.assert_allclose(np_(scores), [score], rtol=1e-5)


@pytest.mark.portable
@pytest.mark.parametrize("seed", [77, 78])
def test_hugging_faces_stopping_keeps_a_sentence_stopped_beside_one_decoding_on(seed):
    """Once Hugging Face's rule stops a sentence, it stays stopped (as in
    transformers), whatever its batch still decodes: here beside a sentence
    that a target prefix keeps going, it gives what it gives alone. These
    tables are ones where a rule asked afresh at each step would take the
    stopped sentence up again."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(6, 6)) * 2
    logits[:, EOS] += 1.5
    model = BigramModel(normalized(logits))
    sampler = BeamSampler(3, 1.0, length_penalty="huggingface")
    source = np.array([[5, EOS], [5, EOS]], "int32")
    alone = loop.decode(model, source[:1], sampler, max_length=10)
    prefix = np.array([[0] * 6, [4] * 6], "int32")  # the second sentence starts with six tokens of id 4
    beside = loop.decode(model, source, sampler, max_length=10, target_prefix=prefix)
    assert np_(beside[0])[0].tolist() == np_(alone[0])[0].tolist()
    np.testing.assert_allclose(np_(beside[1])[0], np_(alone[1])[0], rtol=1e-5)
