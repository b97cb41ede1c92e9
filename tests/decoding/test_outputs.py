"""What a translation returns: scores and n-best lists, scores of given
translations, word alignments, sampling, and outputs that do not depend on
the batch; on a real model trained to permute its input's words."""

import numpy as np
import pytest
from keras import ops

from keras_transformer import Translator
from keras_transformer.decoding import beam_search, jit_decoder
from keras_transformer.decoding.sampling import RandomSampler
from keras_transformer.tokens import EOS_ID
from tests.decoding.permuting import PERMUTATIONS, permute, sentences, train_permuting_model

pytestmark = pytest.mark.backend  # run on TensorFlow, JAX and PyTorch (tests/run.sh)

@pytest.fixture(scope="module")
def permuting():
    return train_permuting_model()


def agreement(held_out, alignments):
    """The share of target words linked to the source word they come from."""
    agree = total = 0
    for sentence, links in zip(held_out, alignments):
        source_of = {int(t): int(s) for s, t in (link.split("-") for link in links.split())}
        for target_word, source_word in enumerate(PERMUTATIONS[len(sentence.split())]):
            agree += source_of.get(target_word) == source_word
            total += 1
    return agree / total


def test_alignments_follow_the_permutation_that_a_diagonal_misses(permuting):
    model, tokenizer, held_out = permuting
    best = [h[0] for h in Translator(model, tokenizer).hypotheses(held_out, alignments=True)]
    right = [(s, h.alignment) for s, h in zip(held_out, best) if h.text == permute(s)]
    assert len(right) >= 0.7 * len(held_out)  # it learned the permutations
    sources, links = zip(*right)
    assert agreement(sources, links) >= 0.9
    diagonal = [" ".join(f"{i}-{i}" for i in range(len(s.split()))) for s in sources]
    assert agreement(sources, diagonal) < 0.5


def test_scores_of_the_searchs_own_outputs_are_the_scores_it_reported(permuting):
    # Compared on token ids: the n best of beam search, and greedy decoding
    # scored with the same length penalty.
    model, tokenizer, held_out = permuting
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
    # Text in: the pieces of the target, EOS last, scored as by their ids.
    [text] = translator.score([held_out[0]], [permute(held_out[0])])
    [ids] = translator.score_ids([sources[0]], [tokenizer.encode(permute(held_out[0])) + [EOS_ID]])
    assert text.tokens == tokenizer.id_to_piece(ids.tokens) and text.tokens[-1] == "</s>"
    assert text.log_probs == pytest.approx(ids.log_probs)


def test_sampling_is_seeded_per_sentence_and_cut_to_the_top_tokens(permuting):
    model, tokenizer, held_out = permuting
    translator = Translator(model, tokenizer, batch_size=64)
    hot = dict(temperature=3.0)
    first = translator.translate(held_out, sampler=RandomSampler(seed=1, **hot))
    assert translator.translate(held_out, sampler=RandomSampler(seed=1, **hot)) == first
    second = translator.translate(held_out, sampler=RandomSampler(seed=2, **hot))
    assert sum(a != b for a, b in zip(first, second)) >= len(held_out) / 2
    alone = [translator.translate([s], sampler=RandomSampler(seed=1, **hot))[0] for s in held_out[:10]]
    assert alone == first[:10]
    # Cut to the single most likely token, sampling is greedy decoding.
    greedy = Translator(model, tokenizer, beam_size=1).translate(held_out)
    for cut in (dict(top_k=1), dict(top_p=1e-6)):
        assert translator.translate(held_out, sampler=RandomSampler(seed=3, **hot, **cut)) == greedy


def test_a_sentence_translates_alike_alone_and_in_a_shuffled_batch(permuting):
    model, tokenizer, held_out = permuting
    others = sentences(200, seed=2)
    batch = held_out + [s for s in others if s not in set(held_out)][: 64 - len(held_out)]
    order = np.random.default_rng(0).permutation(len(batch))
    shuffled = [batch[i] for i in order]
    translator = Translator(model, tokenizer, batch_size=64)
    for options in (dict(), dict(sampler=RandomSampler(seed=5, temperature=2.0))):
        together = dict(zip(shuffled, translator.translate(shuffled, **options)))
        assert [translator.translate([s], **options)[0] for s in held_out] == [together[s] for s in held_out]
