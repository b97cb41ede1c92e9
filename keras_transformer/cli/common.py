"""What several commands share: argument types and loading a model to translate with.

Example:

>>> from keras_transformer.cli.common import translate_function
>>> translate, _, _ = translate_function("saved_models/tatoeba_en_fr")
>>> translate(["I love you."])
["Je t'aime."]
"""

import argparse
import os


def positive_int(text):
    """An argparse `type`: an integer >= 1.

    >>> positive_int("8")
    8
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1. Received: {text}")
    return value


def load_keras_model(path, weights=None):
    """A `.keras` file, or a training run folder (`run.json`) with `weights`
    (e.g. the output of `average-checkpoints`)."""
    import keras

    from keras_transformer import Transformer
    from keras_transformer.training.manifest import read_manifest

    if os.path.isdir(path):
        manifest = read_manifest(path)
        if manifest is None or not weights:
            raise SystemExit(
                f"{path!r} is a folder: expected a training run (run.json) and --weights "
                "(a .weights.h5 file, e.g. from average-checkpoints)"
            )
        model = Transformer(**manifest.get("identity", manifest)["model"])
        model.build(((None, None), (None, None)))
        model.load_weights(weights)
        return model
    if not os.path.isfile(path):
        raise SystemExit(f"No model file at {path!r} (expected a .keras file or a run folder)")
    return keras.saving.load_model(path, compile=False)


def load_tokenizer(path):
    """The SentencePiece processor of the `.model` file given as `--tokenizer`."""
    import sentencepiece as spm

    if not path or not os.path.isfile(path):
        raise SystemExit(f"--tokenizer must name a SentencePiece .model file. Received: {path!r}")
    return spm.SentencePieceProcessor(model_file=path)


def translate_function(model, tokenizer=None, beam_size=4, alpha=0.6):
    """`translate(sentences) -> translations` with a SavedModel folder, or a
    `.keras` file and its `tokenizer` file (decoded with `beam_size`, `alpha`).

    Returns `(translate, keras_model, tokenizer)`, the last two None with a
    SavedModel (which carries its own tokenizer and decoding settings).
    """
    if model.endswith(".keras"):
        from keras_transformer.decoding import Translator

        keras_model, sp = load_keras_model(model), load_tokenizer(tokenizer)
        return Translator(keras_model, sp, beam_size=beam_size, alpha=alpha).translate, keras_model, sp
    from keras_transformer.serving.predictor import load_saved_model_predictor

    predict, _ = load_saved_model_predictor(model)
    return (lambda texts: [row["translations"] for row in predict(texts)]), None, None
