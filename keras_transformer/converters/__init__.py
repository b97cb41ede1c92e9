"""Converters of a trained model to other runtimes' formats.

`keras_transformer.converters.ctranslate2`: a CTranslate2 model directory
(needs the optional `ctranslate2` package). The SavedModel, this package's
own serving format, is written by `Translator.export`.
"""
