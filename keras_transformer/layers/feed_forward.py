"""Position-wise feed-forward network (section 3.3)."""

import keras
from keras import ops

from keras_transformer.validation import check_positive


def serialized_activation(activation):
    """`activation` as a config holds it: the name of one of Keras'
    activations (`keras.activations.gelu` gives `"gelu"`), or the
    serialized form of a function registered with
    `keras.saving.register_keras_serializable`; a name of `ACTIVATIONS`
    as it is."""
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return activation
    try:
        return keras.activations.serialize(keras.activations.get(activation))
    except (TypeError, ValueError, OSError) as error:
        raise ValueError(
            "Argument `activation` must be the name of a Keras activation or a function registered with "
            f"`keras.saving.register_keras_serializable` ({error}). Received: activation={activation!r}"
        ) from None
def gelu_sigmoid(x):
    """GELU's sigmoid approximation, x * sigmoid(1.702 * x) (Hendrycks and
    Gimpel, 2016): Marian's `gelu` before its release 1.12.3."""
    return x * ops.sigmoid(1.702 * x)


def gelu_approximate(x):
    """GELU's tanh approximation (Hugging Face's `gelu_new`)."""
    return keras.activations.gelu(x, approximate=True)


# The activations of imported models that Keras names otherwise, by the name
# a config gives them; any other name is Keras' (`keras.activations.get`).
ACTIVATIONS = {"gelu_sigmoid": gelu_sigmoid, "gelu_approximate": gelu_approximate}


@keras.saving.register_keras_serializable(package="keras_transformer")
class FeedForward(keras.layers.Layer):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied at every position.

    Args:
        d_model: int. Width of the inputs and outputs.
        d_ff: int. Width of the inner layer.
        activation: Activation of the inner layer: a Keras activation, by
            name or as the function (its config holds the name), a
            registered function, or one of `ACTIVATIONS`. Defaults to
            `"relu"`.
        **kwargs: Standard layer arguments.

    It acts on each position alone: a Keras mask on its input passes on to
    its output.

    Example:

    >>> FeedForward(d_model=16, d_ff=64)(keras.ops.ones((2, 3, 16))).shape
    (2, 3, 16)
    """

    def __init__(self, d_model, d_ff, activation="relu", **kwargs):
        super().__init__(**kwargs)
        check_positive("d_model", d_model)
        check_positive("d_ff", d_ff)
        self.d_model = d_model
        self.d_ff = d_ff
        self.activation_name = activation if isinstance(activation, str) and activation in ACTIVATIONS else None
        self.activation = (ACTIVATIONS[activation] if self.activation_name
                           else keras.activations.get(serialized_activation(activation)))
        self.inner = keras.layers.Dense(
            d_ff, activation=self.activation, dtype=self.dtype_policy, name="inner"
        )
        self.outer = keras.layers.Dense(d_model, dtype=self.dtype_policy, name="outer")
        self.supports_masking = True

    def build(self, input_shape):
        self.inner.build(input_shape)
        self.outer.build(tuple(input_shape[:-1]) + (self.d_ff,))
        self.built = True

    def call(self, x):
        return self.outer(self.inner(x))  # (batch, length, d_ff) -> (batch, length, d_model)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.d_model)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "d_ff": self.d_ff,
                "activation": self.activation_name or keras.activations.serialize(self.activation),
            }
        )
        return config
