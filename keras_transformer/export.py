"""Export a trained model as a SavedModel that translates strings.

`export(model, tokenizer, export_dir, ...)` is
`Translator(model, tokenizer, ...).export(export_dir, ...)`: the decoding
options make the `Translator`, whose `translate()` the SavedModel traces
(`keras_transformer.saved_model` describes the graph and its signature).

Example:

>>> path = export(model, tokenizer, "saved_models/tatoeba_en_fr")
>>> reloaded = tf.saved_model.load(path)
>>> reloaded.signatures["serving_default"](inputs=tf.constant(["Hi."]))
"""

from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.translator import DECODING_OPTIONS, Translator
from keras_transformer.saved_model import next_version

__all__ = ["export", "next_version"]


def export(model, tokenizer, export_dir, **options):
    """Writes `export_dir/<version>/`, a SavedModel that translates strings.

    Args:
        model: a trained `Transformer` (TensorFlow backend).
        tokenizer: its `SubwordTokenizer`, or the path of its SentencePiece
            `.model` file, or that file's bytes.
        export_dir: the model folder, e.g. `saved_models/tatoeba_en_fr`.
        **options: the `Translator`'s decoding options (`beam_size`,
            `alpha`, `max_extra_length`, `narrow_batches`, `long_inputs`,
            `buckets`, with its defaults) and the graph's
            (`Translator.export`: `version`, `n_best`, `jit_compile`,
            `parallel_loops`, `warmup_batch_sizes`, `metadata`).

    Returns:
        The version folder's path.
    """
    if isinstance(tokenizer, (bytes, bytearray)):
        tokenizer = SubwordTokenizer(tokenizer)
    elif not isinstance(tokenizer, SubwordTokenizer):
        tokenizer = SubwordTokenizer.load(tokenizer)
    decoding = {name: options.pop(name) for name in DECODING_OPTIONS if name in options}  # the rest: the graph's
    return Translator(model, tokenizer, **decoding).export(export_dir, **options)
