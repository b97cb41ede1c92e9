"""The Translator: text round trip, batching, order, long inputs, arguments;
then a trained model and a SentencePiece vocabulary against decoding by
hand; then what a translation returns: scores and n-best lists, scores of
given translations, word alignments, sampling, and outputs that do not
depend on the batch."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import Translator
from keras_transformer.decoding import BeamSampler, RandomSampler, get_sampler
from keras_transformer.decoding import beam_search, jit_decoder
from keras_transformer.decoding.common import NEG_INF
from keras_transformer.translation.runner import DECODER_CACHE_SIZE
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID
from tests.decoding.toy_models import CopyModel, WordTokenizer
from tests.decoding.permuting import WORDS as PERMUTING_WORDS
from tests.decoding.permuting import PERMUTATIONS, permute, permuting_model, sentences
from tests.decoding.trained_copy import padded

# `backend` (also on JAX and PyTorch): a trained model against decoding by
# hand, and the backend's random numbers. The Translator's own rules are
# Python (`portable`: tests/run.sh runs them once, on PyTorch); its eager
# start and its batches on TensorFlow run in the TensorFlow pass, and
# tests/pipeline compares whole translations across backends.

WORDS = "the cat sat on a mat and dog ran far".split()


def copy_translator(**kwargs):
    model = CopyModel(vocab_size=4 + len(WORDS), max_length=16)
    return Translator(model, WordTokenizer(WORDS), **kwargs)


@pytest.mark.parametrize("beam_size, jit_compile", [(4, True), (1, False)])
def test_round_trip_keeps_order_and_empty_strings(beam_size, jit_compile):
    translator = copy_translator(beam_size=beam_size, batch_size=2, jit_compile=jit_compile)
    texts = ["the cat sat on a mat", "", "dog ran", "a dog and a cat ran far on the mat", "cat", "   "]
    assert translator.translate(texts) == [t if t.strip() else "" for t in texts]
    assert translator.translate([]) == []


@pytest.mark.portable
def test_each_sentence_keeps_the_hypotheses_its_search_finished(monkeypatch):
    # Beam search leaves out the placeholders of hypotheses it never
    # finished: one sentence may have fewer than another.
    translator = copy_translator(beam_size=2, jit_compile=False)
    finished = [([[4, EOS_ID], [5, EOS_ID]], [-0.1, -0.5]), ([[6, EOS_ID]], [-0.2])]
    monkeypatch.setattr(translator.runner, "decode", lambda pieces, sampler, prefixes: finished)
    first, second, blank = translator.hypotheses(["the", "cat", ""], n_best=2)
    assert [(h.text, h.score) for h in first] == [("the", -0.1), ("cat", -0.5)]
    assert [(h.text, h.score) for h in second] == [("sat", -0.2)] and [h.text for h in blank] == [""]


@pytest.mark.portable
def test_the_decoder_cache_stays_within_its_bound_over_a_thousand_sampling_seeds():
    # Each sampler configuration has its own decoder; a long-running process
    # sampling with new seeds keeps only the most recently used.
    translator = copy_translator(beam_size=2, jit_compile=False)
    runner = translator.runner
    first = translator.translate(["the cat"], sampler=RandomSampler(seed=0))
    for seed in range(1000):
        runner.decoder(RandomSampler(seed=seed))
        assert len(runner.decoders) <= runner.cache_size == DECODER_CACHE_SIZE
    assert runner.decoder(RandomSampler(seed=999)) is runner.decoder(RandomSampler(seed=999))
    assert translator.translate(["the cat"], sampler=RandomSampler(seed=0)) == first


@pytest.mark.portable
def test_translate_ids_accepts_lists_and_padded_arrays():
    translator = copy_translator(beam_size=2, jit_compile=False)
    assert translator.translate_ids([[4, 5, 3], [6, 3], []]) == [[4, 5], [6], []]
    padded = np.array([[4, 5, 3], [6, 3, 0]], "int64")
    assert translator.translate_ids(padded) == [[4, 5], [6]]


@pytest.mark.portable
def test_an_over_long_source_is_translated_whole_in_windows_or_truncated_if_asked():
    # max_length 16 less 50 extra tokens: a source budget of 8 tokens, 7 words and EOS.
    long = " ".join(WORDS * 2)  # 20 words, no sentence end: windows of 7, 7 and 6 words
    translator = copy_translator(beam_size=2, jit_compile=False)
    assert translator.preprocessor.source_budget == 8
    assert translator.translate([long, "the cat"]) == [long, "the cat"]
    assert translator.translate_ids([[4] * 20 + [EOS_ID]]) == [[4] * 20]
    truncating = copy_translator(beam_size=2, jit_compile=False, long_inputs="truncate")
    assert truncating.translate([long, "the cat"]) == [" ".join((WORDS * 2)[:7]), "the cat"]
    assert truncating.translate_ids([[4] * 20 + [EOS_ID]]) == [[4] * 7]


@pytest.mark.portable
@pytest.mark.parametrize(
    "kwargs, name",
    [(dict(beam_size=0), "beam_size"), (dict(alpha=-1.0), "alpha"), (dict(batch_size=0), "batch_size"),
     (dict(max_extra_length=-5), "max_extra_length"), (dict(narrow_batches="yes"), "narrow_batches"),
     (dict(long_inputs="cut"), "long_inputs"), (dict(buckets=(1,)), "buckets"), (dict(stop="soon"), "stop"),
     (dict(beam_size=1, stop="never"), "stop")],
)
def test_bad_arguments_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        copy_translator(**kwargs)


@pytest.mark.portable
@pytest.mark.parametrize("ids", [[[4, 2.5]], [[4, True]], [["4"]], [[4, 99]], [[-1, 3]], "4 3", [4, 3]])
def test_bad_ids_raise(ids):
    translator = copy_translator(jit_compile=False)
    with pytest.raises(ValueError, match="source_ids"):
        translator.translate_ids(ids)


@pytest.mark.portable
def test_translate_needs_a_tokenizer_and_strings():
    translator = Translator(CopyModel(), jit_compile=False)
    with pytest.raises(ValueError, match="tokenizer"):
        translator.translate(["a"])
    translator = copy_translator(jit_compile=False)
    for sentences, received in (("the cat", "sentences='the cat'"), (None, "sentences=None"),
                                ((s for s in ["the cat"]), "a generator: make it a list"),
                                (["the cat", 3], "sentences\\[1\\]=3")):
        with pytest.raises(ValueError, match=f"Argument `sentences` must be a list of strings. Received: {received}"):
            translator.translate(sentences)
    with pytest.raises(ValueError, match="Argument `sources` must be a list of strings. Received: sources=None"):
        translator.score(None, [])


# A real model and a real SentencePiece vocabulary ---------------------------


@pytest.fixture(scope="module")
def permuting():
    """The model trained to permute its words (tests/decoding/permuting.py)."""
    return permuting_model()


@pytest.fixture(scope="module")
def trained(permuting):
    """`(model, tokenizer, training sentences, 2 held-out sentences)`."""
    model, tokenizer, train, held_out = permuting
    return model, tokenizer, train, held_out[:2]


def greedy_by_hand(model, processor, texts, max_extra_length=50):
    """`{text: (ids, translation, log_probs)}`: the most likely next token
    at every step by full uncached decoder passes, ids from and text by the
    SentencePiece processor itself, and the log-probability of each token
    chosen (EOS included where it ends).

    Sources and decoder inputs are fixed buffers of the model's max_length
    (the decoder input: BOS, the tokens so far, then 0), so that every pass
    has one shape (eager JAX compiles each new shape); causal attention
    keeps the later positions from acting on position `step`.
    """
    width = model.transformer_config.max_length
    encoded = [processor.encode(t) + [EOS_ID] for t in texts]
    source = padded([ids + [0] * (width - len(ids)) for ids in encoded])
    memory, mask = model.encode(source), source != 0
    target = np.zeros((len(texts), width), "int32")
    target[:, 0] = BOS_ID
    outputs, log_probs, done = [[] for _ in texts], [[] for _ in texts], [False] * len(texts)
    for step in range(width):
        logits = ops.convert_to_numpy(model.decode(target, memory, mask))[:, step].astype("float64")
        shifted = logits - logits.max(-1, keepdims=True)
        step_log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        for i, ids in enumerate(encoded):
            # At most source length + max_extra_length tokens, EOS included.
            done[i] = done[i] or len(outputs[i]) >= min(len(ids) + max_extra_length, width)
            if done[i]:
                continue
            token = int(np.argmax(logits[i]))
            log_probs[i].append(float(step_log_probs[i, token]))
            if token == EOS_ID:
                done[i] = True
                continue
            outputs[i].append(token)
            if step + 1 < width:
                target[i, step + 1] = token
        if all(done):
            break
    return {t: (ids, processor.decode(ids), probs) for t, ids, probs in zip(texts, outputs, log_probs)}


@pytest.fixture(scope="module")
def by_hand(trained):
    """The decoding by hand of 8 training and 2 unseen sentences."""
    model, tokenizer, train, held_out = trained
    return greedy_by_hand(model, tokenizer.processor, train[:8] + held_out)


@pytest.mark.backend
def test_greedy_translations_of_a_trained_model_equal_decoding_by_hand(trained, by_hand):
    model, tokenizer, train, held_out = trained
    texts = train[:8] + [""] + held_out + ["   "]
    # batch_size=4: sorted by length into padded batches (source padding and
    # empty filler rows), compiled decoding with the key/value cache. Each
    # score: the log-probabilities found by hand over GNMT's length
    # penalty, alpha 0.6 (a blank input's: 0).
    found = [best for [best] in Translator(model, tokenizer, beam_size=1, batch_size=4).hypotheses(texts)]
    out = [h.text for h in found]
    assert out == [by_hand[t][1] if t.strip() else "" for t in texts]
    assert sum(a == permute(b) for a, b in zip(out, train[:8])) >= 4  # it learned: no trivial output
    scores = [sum(by_hand[t][2]) / ((5 + len(by_hand[t][2])) / 6) ** 0.6 if t.strip() else 0.0 for t in texts]
    np.testing.assert_allclose([h.score for h in found], scores, atol=1e-4)


def test_auto_on_tensorflow_decodes_eagerly_until_a_call_takes_it_past_eager_steps(trained, by_hand, monkeypatch):
    # Eagerly, every step calls the model's `decode` from Python; the graph
    # calls it only while it is traced, once.
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("jax.jit on JAX, eager on PyTorch: no eager start")
    model, tokenizer, train, held_out = trained
    texts = train[:8] + held_out
    assert all(len(tokenizer.encode(t)) < 16 for t in texts)  # each batch: 16 steps, the first bucket
    expected = [by_hand[t][1] for t in texts]
    translator = Translator(model, tokenizer, beam_size=1, batch_size=4, eager_steps=16)
    calls = []
    monkeypatch.setattr(model, "decode", lambda *a, f=model.decode, **kw: calls.append(1) or f(*a, **kw))

    def translated(part):
        del calls[:]
        assert translator.translate(texts[:part]) == expected[:part]
        return len(calls)

    # In batches of 4: 4 texts, 16 steps, eager; 1 more, past them: the
    # graph, traced; then the graph, run, for 10 texts in 3 batches.
    assert [translated(4) > 0, translated(1) > 0, translated(10)] == [True, True, 0]
    # Each batch counts once: in batches of 2, 4 texts: 16 x 2 = 32 steps,
    # eager, 16 left; 1 more text spends them, eager too. (Counted by
    # sentence, the first call would have traced the graph, and the second
    # run it without a call of `decode`.)
    translator = Translator(model, tokenizer, beam_size=1, batch_size=2, eager_steps=48)
    runner = translator.runner
    found = [translated(4) > 0, runner.eager_steps_left, translated(1) > 0, runner.eager_steps_left]
    assert found == [True, 16, True, 0]


@pytest.mark.portable
def test_beam_search_of_width_one_is_the_greedy_decoding_by_hand(trained, by_hand):
    model, tokenizer, _, _ = trained
    texts = list(by_hand)
    source = padded([tokenizer.processor.encode(t) + [EOS_ID] for t in texts])
    tokens, _ = jit_decoder(model, beam_search, beam_size=1, alpha=0.6, max_extra_length=50)(source)
    for row, text in zip(ops.convert_to_numpy(tokens).tolist(), texts):
        ids = by_hand[text][0]
        assert row == (ids + [EOS_ID] + [0] * len(row))[: len(row)]  # EOS, then padding


@pytest.mark.portable
def test_beam_search_translations_narrow_the_batch_and_equal_the_whole_batch(trained, monkeypatch):
    # Widths of 16, 8 and 4 sentences under `jax.jit` and XLA
    # (`narrow_batches`: tests/export/test_xla_export.py); on PyTorch, where
    # tests/run.sh runs this, and eagerly each sentence leaves the batch when
    # done. Either way each translation is the one of the 16 sources decoded
    # together.
    import importlib

    monkeypatch.setattr(importlib.import_module("keras_transformer.decoding.loop"), "NARROWEST_WIDTH", 1)
    model, tokenizer, train, held_out = trained
    texts = train[16:30] + held_out
    sources = [tokenizer.processor.encode(t) + [EOS_ID] for t in texts]
    tokens, _ = jit_decoder(model, beam_search, beam_size=4, alpha=0.6, max_extra_length=50)(padded(sources))
    expected = [row[: row.index(EOS_ID)] if EOS_ID in row else row for row in ops.convert_to_numpy(tokens).tolist()]
    rows = []  # the rows of every decoding step run (or traced)
    monkeypatch.setattr(model, "decode", lambda ids, *a, f=model.decode, **kw: rows.append(ids.shape[0]) or f(ids, *a, **kw))
    for jit_compile in (True, False):
        del rows[:]
        translator = Translator(model, tokenizer, beam_size=4, batch_size=16, jit_compile=jit_compile,
                                narrow_batches=True)
        assert translator.translate_ids(sources) == expected
        assert max(rows) == 64 and min(rows) <= 16, rows  # 16 sentences x 4 beams, down to 4 x 4
    assert len({len(ids) for ids in expected}) >= 4  # outputs of several lengths: sentences finish apart


# What a translation returns ----------------------------------------------


def agreement(held_out, alignments):
    """The share of target words linked to the source word they come from."""
    agree = total = 0
    for sentence, links in zip(held_out, alignments):
        source_of = {int(t): int(s) for s, t in (link.split("-") for link in links.split())}
        for target_word, source_word in enumerate(PERMUTATIONS[len(sentence.split())]):
            agree += source_of.get(target_word) == source_word
            total += 1
    return agree / total


@pytest.mark.portable
def test_alignments_follow_the_permutation_that_a_diagonal_misses(permuting):
    model, tokenizer, _, held_out = permuting
    best = [h[0] for h in Translator(model, tokenizer).hypotheses(held_out, alignments=True)]
    right = [(s, h.alignment) for s, h in zip(held_out, best) if h.text == permute(s)]
    assert len(right) >= 0.7 * len(held_out)  # it learned the permutations
    sources, links = zip(*right)
    assert agreement(sources, links) >= 0.9
    diagonal = [" ".join(f"{i}-{i}" for i in range(len(s.split()))) for s in sources]
    assert agreement(sources, diagonal) < 0.5


@pytest.mark.portable
def test_scores_of_the_searchs_own_outputs_are_the_scores_it_reported(permuting):
    # Compared on token ids: the n best of beam search, and greedy decoding
    # scored with the same length penalty.
    model, tokenizer, _, held_out = permuting
    translator = Translator(model, tokenizer, alpha=0.6)
    sources = [ids + [EOS_ID] for ids in tokenizer.encode(held_out[:16])]
    width = max(map(len, sources))
    batch = np.array([ids + [0] * (width - len(ids)) for ids in sources], "int32")
    tokens, scores = jit_decoder(model, beam_search, beam_size=4, alpha=0.6, num_return=3)(batch)
    tokens, scores = ops.convert_to_numpy(tokens), ops.convert_to_numpy(scores)
    pairs = [(i, row[: list(row).index(EOS_ID) + 1].tolist(), score)
             for i, (rows, row_scores) in enumerate(zip(tokens, scores))
             for row, score in zip(rows, row_scores) if EOS_ID in row]
    assert len(pairs) >= 40
    given = translator.score_ids([sources[i] for i, _, _ in pairs], [target for _, target, _ in pairs])
    np.testing.assert_allclose([g.score for g in given], [score for _, _, score in pairs], atol=1e-4)
    for g, (_, target, _) in zip(given, pairs):
        assert g.tokens == target and len(g.log_probs) == len(target)
        assert g.total == pytest.approx(sum(g.log_probs))
    # `hypotheses`: the same n best, their scores, and as confidence their
    # tokens' mean log-probability.
    hypotheses = translator.hypotheses(held_out[:16], n_best=3)
    for i, found in enumerate(hypotheses):
        mine = [(g.score, g.total / len(g.tokens)) for g, (j, _, _) in zip(given, pairs) if j == i]
        np.testing.assert_allclose([(h.score, h.confidence) for h in found], mine, atol=1e-4)
    # Greedy decoding and sampling score their outputs as beam search does.
    for sampler in (get_sampler(beam_size=1, alpha=0.6), RandomSampler(temperature=2.0, seed=1, alpha=0.6)):
        tokens, scores = (ops.convert_to_numpy(x) for x in jit_decoder(model, sampler, max_extra_length=50)(batch))
        ended = [(i, row[: list(row).index(EOS_ID) + 1].tolist()) for i, row in enumerate(tokens) if EOS_ID in row]
        assert len(ended) >= 12
        given = translator.score_ids([sources[i] for i, _ in ended], [ids for _, ids in ended])
        np.testing.assert_allclose([g.score for g in given], [scores[i] for i, _ in ended], atol=1e-4)
    with pytest.raises(ValueError, match=r"`target_ids` row 0 has 40 tokens; the model scores at most 31"):
        translator.score_ids([sources[0]], [[5] * 40])
    # Text: the error names `score`'s own argument and shows the text.
    with pytest.raises(ValueError, match=r"`sources` row 0 has 41 tokens with its EOS; the model scores at most 32. "
                                         r"Received: 'cat cat"):
        translator.score([" ".join(["cat"] * 20)], ["dog"])
    # Text in: the pieces of the target, EOS last, scored as by their ids.
    [text] = translator.score([held_out[0]], [permute(held_out[0])])
    [ids] = translator.score_ids([sources[0]], [tokenizer.encode(permute(held_out[0])) + [EOS_ID]])
    assert text.tokens == tokenizer.id_to_piece(ids.tokens) and text.tokens[-1] == "</s>"
    assert text.log_probs == pytest.approx(ids.log_probs)


@pytest.mark.backend
def test_sampling_is_seeded_per_sentence_and_cut_to_the_top_tokens(trained, by_hand):
    # The sentences decoded by hand; outputs of at most 4 tokens beyond the
    # source, which hot samples run on to. On TensorFlow every call eager (5
    # calls of a 16-step bucket); its graph samples in the shuffled batch
    # test below.
    model, tokenizer, _, _ = trained
    texts = list(by_hand)
    translator = Translator(model, tokenizer, batch_size=16, max_extra_length=4, eager_steps=80)
    hot = dict(temperature=3.0)
    first = translator.translate(texts, sampler=RandomSampler(seed=1, **hot))
    second = translator.translate(texts, sampler=RandomSampler(seed=2, **hot))
    assert sum(a != b for a, b in zip(first, second)) >= len(texts) / 2
    # The same seed again, each sentence in another batch and row: the
    # others, in reverse order (compiled for the same shape).
    assert translator.translate(texts[:0:-1], sampler=RandomSampler(seed=1, **hot)) == first[:0:-1]
    # Cut to the single most likely token, sampling is greedy decoding.
    greedy = [by_hand[t][1] for t in texts]
    for cut in (dict(top_k=1), dict(top_p=1e-6)):
        assert translator.translate(texts, sampler=RandomSampler(seed=3, **hot, **cut)) == greedy


@pytest.mark.portable
def test_target_prefixes_start_each_output_and_are_scored_once(permuting, monkeypatch):
    # Each prefix is a word the model would not start with: the source's
    # first word (no permutation keeps it first). The graph at once (no
    # eager steps); XLA's steering: tests/export/test_xla_export.py.
    model, tokenizer, _, held_out = permuting
    translator = Translator(model, tokenizer, eager_steps=0)
    texts = held_out[:12]
    prefixes = [s.split()[0] if i % 3 else "" for i, s in enumerate(texts)]  # every third without one
    plain = translator.translate(texts)
    for sampler in (None, RandomSampler(seed=3, temperature=2.0)):
        found = translator.hypotheses(texts, n_best=1 if sampler else 2, sampler=sampler, target_prefix=prefixes)
        outputs = [h for hypotheses in found for h in hypotheses]
        owners = [i for i, hypotheses in enumerate(found) for _ in hypotheses]
        for i, h in zip(owners, outputs):
            assert h.text.startswith(prefixes[i]), (texts[i], prefixes[i], h.text)
    # On token ids, each sampler: the outputs start with the
    # prefix's ids, and the search's score of each is `score_ids` of the same
    # ids (the prefix's tokens counted once).
    sources = [ids + [EOS_ID] for ids in tokenizer.encode(texts)]
    prefix_ids = tokenizer.encode(prefixes)
    batch, prefix = padded(sources), padded([ids or [0] for ids in prefix_ids])
    samplers = (BeamSampler(4, 0.6, num_return=2), get_sampler(1, 0.6), RandomSampler(seed=3, temperature=2.0))
    for sampler in samplers:
        tokens, scores = (ops.convert_to_numpy(x) for x in sampler(model, batch, 50, False, prefix))
        tokens, scores = tokens.reshape(len(texts), -1, tokens.shape[-1]), scores.reshape(len(texts), -1)
        pairs = [(i, row[: list(row).index(EOS_ID) + 1].tolist(), score)
                 for i, (rows, row_scores) in enumerate(zip(tokens, scores))
                 for row, score in zip(rows, row_scores) if EOS_ID in row]
        # Forced off its course, the toy model may run a few outputs to their
        # length limit, without EOS; those are checked for their prefix only.
        assert len(pairs) >= len(texts) // 2
        for i, (rows, row_scores) in enumerate(zip(tokens, scores)):
            for row in rows[row_scores > NEG_INF]:  # not a placeholder of the n-best
                assert row[: len(prefix_ids[i])].tolist() == prefix_ids[i], (texts[i], prefixes[i], row)
        given = translator.score_ids([sources[i] for i, _, _ in pairs], [ids for _, ids, _ in pairs])
        np.testing.assert_allclose([g.score for g in given], [score for _, _, score in pairs], atol=1e-4)
    forced = translator.translate(texts, target_prefix=prefixes)
    assert [f for f, p in zip(forced, prefixes) if not p] == [t for t, p in zip(plain, prefixes) if not p]
    assert sum(not t.startswith(p) for t, p in zip(plain, prefixes) if p) >= 4  # the prefixes change outputs
    assert translator.translate(texts, target_prefix=[""] * len(texts)) == plain
    with pytest.raises(ValueError, match=r"`target_prefix` must hold one entry per sentence. Received: 1 entries"):
        translator.translate(texts[:2], target_prefix=["a"])
    with pytest.raises(ValueError, match=r"`target_prefix` of sentence 0 forces \d+ tokens \(prefix and constraints\); "
                                         r"its translation may have at most \d+"):
        translator.translate(texts[:1], target_prefix=[" ".join(["cat"] * 60)])


@pytest.mark.portable
def test_constraints_appear_in_each_output_and_leave_other_sentences_unchanged(permuting, monkeypatch):
    # Each constraint is a word absent from the sentence's translation;
    # every third sentence has none, every fourth two.
    model, tokenizer, _, held_out = permuting
    translator = Translator(model, tokenizer, eager_steps=0)
    texts = held_out[:12]
    plain = translator.translate(texts)
    absent = [[w for w in PERMUTING_WORDS if w not in t.split()] for t in plain]
    constraints = [[] if i % 3 == 0 else words[: 2 if i % 4 == 1 else 1] for i, words in enumerate(absent)]
    for n_best in (1, 2):
        found = translator.hypotheses(texts, n_best=n_best, constraints=constraints)
        for i, hypotheses in enumerate(found):
            for h in hypotheses:
                assert set(constraints[i]) <= set(h.text.split()), (texts[i], constraints[i], h.text)
    steered = translator.translate(texts, constraints=constraints)
    assert [s for s, c in zip(steered, constraints) if not c] == [t for t, c in zip(plain, constraints) if not c]
    # As whole words: "c" is "cat"'s first piece, and the word "c" appears.
    with_cat = [t for t in held_out if "cat" in t.split()][:4]
    assert all("c" in t.split() for t in translator.translate(with_cat, constraints=[["c"]] * len(with_cat)))
    assert translator.translate(texts, constraints=[[]] * len(texts)) == plain
    # On token ids: each output holds its phrases' ids, and the search's
    # score of each is `score_ids` of the same ids.
    sources = [ids + [EOS_ID] for ids in tokenizer.encode(texts)]
    phrase_ids = [tokenizer.encode(c) if c else [] for c in constraints]
    array = np.zeros((len(texts), 2, 1), "int32")
    for i, phrases in enumerate(phrase_ids):
        for j, ids in enumerate(phrases):
            array[i, j, : len(ids)] = ids
    sampler = BeamSampler(4, 0.6, num_return=4)
    tokens, scores = (ops.convert_to_numpy(x) for x in sampler(model, padded(sources), 50, False, None, array))
    pairs = [(i, row[: list(row).index(EOS_ID) + 1].tolist(), score)
             for i, (rows, row_scores) in enumerate(zip(tokens, scores))
             for row, score in zip(rows, row_scores) if EOS_ID in row]
    assert len(pairs) >= len(texts)
    for i, ids, _ in pairs:
        assert all(f" {_joined(p)} " in f" {_joined(ids)} " for p in phrase_ids[i]), (texts[i], constraints[i], ids)
        assert PAD_ID not in ids, ids
    for i in range(len(texts)):  # each hypothesis once
        found = [tuple(ids) for j, ids, _ in pairs if j == i]
        assert len(set(found)) == len(found), found
    given = translator.score_ids([sources[i] for i, _, _ in pairs], [ids for _, ids, _ in pairs])
    np.testing.assert_allclose([g.score for g in given], [score for _, _, score in pairs], atol=1e-4)
    greedy = Translator(model, tokenizer, beam_size=1)
    assert greedy.translate(texts[:2], constraints=[[], []]) == greedy.translate(texts[:2])
    with pytest.raises(ValueError, match=r"`constraints` needs beam search: a translator with beam_size >= 2"):
        greedy.translate(texts[:1], constraints=[["cat"]])
    with pytest.raises(ValueError, match=r"`constraints\[0\]` must be a list of phrases, none of them blank. Received: constraints\[0\]=\[' '\]"):
        translator.translate(texts[:1], constraints=[[" "]])
    with pytest.raises(ValueError, match=r"`constraints` must hold one entry per sentence. Received: 1 entries"):
        translator.translate(texts[:2], constraints=[["cat"]])
    with pytest.raises(ValueError, match=r"`constraints` of sentence 0 forces \d+ tokens"):
        translator.translate(texts[:1], constraints=[["cat"] * 60])


def _joined(ids):
    return " ".join(map(str, ids))


def test_a_sentence_translates_alike_alone_and_in_a_shuffled_batch(permuting):
    model, tokenizer, _, held_out = permuting
    others = sentences(200, seed=2)
    batch = held_out + [s for s in others if s not in set(held_out)][: 64 - len(held_out)]
    order = np.random.default_rng(0).permutation(len(batch))
    shuffled = [batch[i] for i in order]
    # Outputs of at most 4 tokens beyond the source, which samples run on
    # to; on TensorFlow the translator's graph from the first call.
    translator = Translator(model, tokenizer, batch_size=64, max_extra_length=4, eager_steps=0)
    alone = held_out[:16]  # each alone; all of held_out in the batch
    for options in (dict(), dict(sampler=RandomSampler(seed=5, temperature=2.0))):
        together = dict(zip(shuffled, translator.translate(shuffled, **options)))
        assert [translator.translate([s], **options)[0] for s in alone] == [together[s] for s in alone]


@pytest.mark.backend
def test_prefix_constraint_and_scoring_paths_compiled_once_equal_the_eager_ones(permuting, by_hand):
    # The Translator's target prefixes and constraints under jax.jit against
    # the eager paths, and force-decoded scores under jax.jit against the
    # decoding by hand. On JAX, where compiling costs least; TensorFlow's
    # graph of them is the export's (tests/export, tests/serving).
    if keras.backend.backend() != "jax":
        pytest.skip("compiled once on JAX, where it costs least; TensorFlow's graph: tests/export, tests/serving")
    import jax

    from keras_transformer.translation import runner

    model, tokenizer, _, held_out = permuting
    texts = held_out[:3]
    eager = Translator(model, tokenizer, beam_size=2, jit_compile=False)
    compiled = Translator(model, tokenizer, beam_size=2, jit_compile=True)
    # One call steers each way: the first sentence by a prefix (a word of its
    # translation, the permutation), the second by a constraint (its first
    # word), the third by both.
    translations = [permute(text) for text in texts]
    prefixes = [translations[0].split()[1], "", translations[2].split()[-1]]
    constraints = [[], [texts[1].split()[0]], [texts[2].split()[0]]]
    expected = eager.hypotheses(texts, n_best=2, target_prefix=prefixes, constraints=constraints)
    found = compiled.hypotheses(texts, n_best=2, target_prefix=prefixes, constraints=constraints)
    assert [[h.text for h in row] for row in found] == [[h.text for h in row] for row in expected]
    np.testing.assert_allclose([[h.score for h in row] for row in found],
                               [[h.score for h in row] for row in expected], atol=1e-4)
    for row, prefix, phrases in zip(found, prefixes, constraints):
        assert all(h.text.startswith(prefix) and set(phrases) <= set(h.text.split()) for h in row), row
    # Scoring: force_decode compiled once, as the runner batches it, of the
    # translations decoded by hand that end with EOS: each token's
    # log-probability as the full passes by hand found it.
    ended = [text for text, (ids, _, log_probs) in by_hand.items() if len(log_probs) == len(ids) + 1]
    sources = [ids + [EOS_ID] for ids in tokenizer.encode(ended)]
    targets = [by_hand[text][0] + [EOS_ID] for text in ended]
    force_decode = runner.force_decode
    jitted = jax.jit(lambda model_, source, target, *rest: force_decode(model_, source, target, *rest),
                     static_argnums=(0,))
    calls = []

    def compiled_force(model_, source, target, *rest):
        calls.append(len(rest))
        return jitted(model_, source, target, *rest)

    runner.force_decode = compiled_force
    try:
        found = eager.score_ids(sources, targets)
    finally:
        runner.force_decode = force_decode
    assert calls and len(ended) >= 8
    assert [s.tokens for s in found] == targets
    np.testing.assert_allclose(np.concatenate([s.log_probs for s in found]),
                               np.concatenate([by_hand[text][2] for text in ended]), atol=1e-4)
