"""The decoding defaults, defined once for the package.

The `Translator`, `beam_search`, the SavedModel export, the command line and
the server read them here. Beam 4 and length penalty 0.6 are the paper's
settings for translation ("Attention Is All You Need", section 6.1), and an
output may run to its input length + 50 tokens, as there.
"""

BEAM_SIZE = 4
ALPHA = 0.6  # the GNMT length penalty's exponent
MAX_EXTRA_LENGTH = 50  # output tokens beyond the source's own length
# When beam search is done with a sentence (`BeamSampler`'s `stop`, defined
# there): "exact" once no alive hypothesis can still beat its best finished
# ones, "early" once its best candidate has ended. "early" by default: on
# each shipped preset's test split it scored within 0.1 BLEU of "exact" in
# fewer steps a sentence (benchmarks/results/stop_rules_cpu.json).
STOP_RULES = ("exact", "early")
STOP = "early"
# Sampling's settings (`RandomSampler`): the whole distribution (no top-k or
# nucleus cut), at temperature 1, with seed 0.
SAMPLING = {"seed": 0, "temperature": 1.0, "top_k": 0, "top_p": 1.0}
# Sentences decoded together, and a command's batch of a file: the batch size
# at which benchmarks/README.md ("On 2 CPU cores") compares our engines with
# CTranslate2.
BATCH_SIZE = 64
# Word alignments read the cross-attention of this decoder layer, the mean
# of its heads (`keras_transformer.translation.alignment`): the last, whose attention
# at the step that predicts a token points at the source word it
# translates, in the shipped English-French model and in
# tests/decoding/test_translator.py (the first layer there agrees less).
ALIGNMENT_LAYER = -1
