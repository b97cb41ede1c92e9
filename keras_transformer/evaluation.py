"""Scoring translations: corpus BLEU and chrF with sacreBLEU.

Example:

>>> from keras_transformer.evaluation import corpus_bleu
>>> bleu, bleu_signature, chrf, chrf_signature = corpus_bleu(
...     ["Le chat est sur le tapis."], [["Le chat dort.", "Le chat est sur le tapis."]])
>>> round(bleu.score, 1), round(chrf.score, 1)
(100.0, 100.0)
"""


def corpus_bleu(hypotheses, references, tokenize="13a"):
    """sacreBLEU BLEU and chrF of `hypotheses` against every reference of a sentence.

    Args:
        hypotheses: one translation (a string) per source sentence.
        references: one non-empty list of reference strings per source
            sentence (e.g. from `datasets.load_references`); sentences may
            have different numbers of references.
        tokenize: BLEU's sacreBLEU tokenizer (`"13a"`, `"intl"`, ...).

    Returns:
        `(bleu, bleu_signature, chrf, chrf_signature)`: sacreBLEU's score
        objects (`.score` is the number) and signatures (`str()` gives
        e.g. "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0").

    Raises:
        ValueError: if the two lists differ in length, are empty, or a
            sentence has no reference.
    """
    import sacrebleu  # an extra's (setup.py), not needed to import the package

    hypotheses, references = list(hypotheses), [list(refs) for refs in references]
    if len(hypotheses) != len(references):
        raise ValueError(
            "Arguments `hypotheses` and `references` must have one entry per sentence. "
            f"Received: len(hypotheses)={len(hypotheses)}, len(references)={len(references)}"
        )
    if not references:
        raise ValueError("Arguments `hypotheses` and `references` must not be empty. Received: 0 sentences")
    for i, refs in enumerate(references):
        if not refs:
            raise ValueError(f"Every sentence needs at least one reference. Received: references[{i}]={refs!r}")
    # sacreBLEU wants reference streams of equal length: a sentence with
    # fewer references repeats its first one (which changes no n-gram maximum).
    streams = [[refs[i] if i < len(refs) else refs[0] for refs in references] for i in range(max(map(len, references)))]
    bleu, chrf = sacrebleu.metrics.BLEU(tokenize=tokenize), sacrebleu.metrics.CHRF()
    return (
        bleu.corpus_score(hypotheses, streams),
        bleu.get_signature(),
        chrf.corpus_score(hypotheses, streams),
        chrf.get_signature(),
    )
