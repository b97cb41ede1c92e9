"""Converters between a trained model and other runtimes' formats.

`keras_transformer.converters.ctranslate2`: a CTranslate2 model directory
(needs the optional `ctranslate2` package). The SavedModel, this package's
own serving format, is written by `keras_transformer.export`.
`keras_transformer.translation.marian` reads Marian and OPUS-MT models
(Hugging Face's folders, Marian's own releases) and makes them presets
(`keras-transformer import`).
"""
