"""Translation: the `Translator` task on a model and a sampler, text in and text out.

The floor above `models/` and `decoding/`: the tokenizer and preprocessor
(strings to ids and back, by one set of rules), request checks, the decode
runner, outputs and word alignments, attention plots, and the loader of a
model by name or path. `export/`, `serving/` and `cli/` build on it.
"""
