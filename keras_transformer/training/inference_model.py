"""The model that inference loads: trained weights in a fresh float32 Transformer.

Example:

>>> from keras_transformer.training import train
>>> from keras_transformer.training.inference_model import save_inference_model
>>> model = train("tiny", train_ds, "runs/tiny", vocab_size=8000)
>>> save_inference_model(model, "runs/tiny/model.keras")
'runs/tiny/model.keras'
"""

import dataclasses


def save_inference_model(model, path):
    """Saves `model`'s weights in a fresh float32 Transformer, without the
    training optimizer, as the `.keras` file that `export` and `translate` load.

    Args:
        model: a trained `keras_transformer.Transformer` (any dtype policy).
        path: where to write it; must end in `.keras`.

    Returns:
        `path`.
    """
    from keras_transformer import Transformer

    if not str(path).endswith(".keras"):
        raise ValueError(f"Argument `path` must end in .keras. Received: path={path!r}")
    inference = Transformer(**dataclasses.asdict(model.transformer_config))
    inference.build(((None, None), (None, None)))
    inference.set_weights(model.get_weights())
    inference.save(path)
    return path
