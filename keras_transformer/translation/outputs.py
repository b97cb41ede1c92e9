"""What a translation returns: its hypotheses, a given translation's scores,
and either as one row of outputs named as the SavedModel's and the REST
API's (`keras_transformer.serving.predictor`)."""

from typing import NamedTuple, Optional


class Hypothesis(NamedTuple):
    """One translation of a sentence (`Translator.hypotheses`)."""

    text: str
    score: float  # its log-probability over the length penalty: what the search ranks by
    confidence: float  # the mean log-probability of its tokens, EOS included
    alignment: Optional[str] = None  # Pharaoh-format word links, on request


def prediction(hypotheses, n_best=1, alignments=False):
    """A sentence's `hypotheses` as one row of outputs, named as the
    SavedModel's and the REST API's: `translations`, `scores` and
    `confidences` of the best; its `alignments` if asked; with `n_best > 1`
    the lists `nbest_translations`, `nbest_scores`, `nbest_confidences`
    (and `nbest_alignments`), best first."""
    best = hypotheses[0]
    row = {"translations": best.text, "scores": best.score, "confidences": best.confidence}
    if alignments:
        row["alignments"] = best.alignment
    if n_best > 1:
        row.update(nbest_translations=[h.text for h in hypotheses], nbest_scores=[h.score for h in hypotheses],
                   nbest_confidences=[h.confidence for h in hypotheses])
        if alignments:
            row["nbest_alignments"] = [h.alignment for h in hypotheses]
    return row


class TokenScores(NamedTuple):
    """A given translation's scores (`Translator.score`)."""

    tokens: list  # its pieces (ids from `score_ids`), EOS last
    log_probs: list  # each token's log-probability
    total: float  # their sum
    score: float  # the sum over the length penalty, as the search scores

    def prediction(self):
        """As one row of outputs, named as the REST API's."""
        return {"scores": self.score, "totals": self.total, "tokens": list(self.tokens),
                "token_log_probs": list(self.log_probs)}
