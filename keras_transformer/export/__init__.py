"""Export: a trained model as a SavedModel that translates strings.

The floor above `translation/`: `export` (a model and its tokenizer) and
`write_saved_model` (a `Translator`) trace the graph (`saved_model`), with
TF Serving's warm-up requests (`warmup`), into a SavedModel folder
(`keras_transformer.translation.saved_model_files`). `serving/` reads what
they write. TensorFlow is imported only when they run.
"""

from keras_transformer.export.saved_model import SIGNATURES, export, write_saved_model

__all__ = ["SIGNATURES", "export", "write_saved_model"]
