"""The model that inference loads: trained weights in a fresh float32 Transformer.

Example:

>>> from keras_transformer.training import train
>>> from keras_transformer.training.inference_model import inference_model
>>> model = train("tiny", train_ds, "runs/tiny", vocab_size=8000)
>>> inference_model(model).save_to_preset("runs/tiny")
"""

import dataclasses

from keras_transformer.models.transformer import Transformer


def inference_model(model):
    """`model`'s weights in a fresh float32 Transformer without the training
    optimizer: what a preset or a `.keras` file holds for translation.

    Args:
        model: a trained `keras_transformer.Transformer` (any dtype policy).

    Returns:
        A built float32 `Transformer`.
    """
    inference = Transformer(**dataclasses.asdict(model.transformer_config))
    inference.build(((None, None), (None, None)))
    inference.set_weights(model.get_weights())
    return inference
