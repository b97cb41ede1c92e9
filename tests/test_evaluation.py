"""keras_transformer.evaluation.corpus_bleu: sacreBLEU with several references per sentence."""

import re

import pytest
import sacrebleu

from keras_transformer.evaluation import corpus_bleu


def test_every_reference_of_a_sentence_counts():
    hypotheses = ["Le chat est sur le tapis.", "Il pleut beaucoup aujourd'hui."]
    references = [["Le chat dort.", "Le chat est sur le tapis."], ["Il pleut beaucoup aujourd'hui."]]
    bleu, bleu_signature, chrf, chrf_signature = corpus_bleu(hypotheses, references)
    assert bleu.score == pytest.approx(100.0) and chrf.score == pytest.approx(100.0)
    assert "nrefs:2" in str(bleu_signature) and "nrefs:2" in str(chrf_signature)
    # The same as sacreBLEU given equal-length streams (a missing reference repeats the first).
    streams = [["Le chat dort.", "Il pleut beaucoup aujourd'hui."],
               ["Le chat est sur le tapis.", "Il pleut beaucoup aujourd'hui."]]
    wrong = ["Le chien est sur le lit.", "Il fait beau."]
    assert corpus_bleu(wrong, references)[0].score == pytest.approx(sacrebleu.corpus_bleu(wrong, streams).score)
    assert corpus_bleu(wrong, references)[2].score == pytest.approx(sacrebleu.corpus_chrf(wrong, streams).score)


@pytest.mark.parametrize(
    "hypotheses, references, message",
    [
        (["a"], [["a"], ["b"]], "len(hypotheses)=1, len(references)=2"),
        ([], [], "must not be empty"),
        (["a", "b"], [["a"], []], "references[1]=[]"),
    ],
)
def test_bad_arguments_are_named(hypotheses, references, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        corpus_bleu(hypotheses, references)
