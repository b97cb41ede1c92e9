"""`run_layer_test`: what every public layer, and the model, must do on the
active backend, in the manner of keras-hub's `TestCase.run_layer_test`
(keras_hub/src/tests/test_case.py):

1. its config: the constructor's arguments, JSON, and the same config
   again from `from_config` and from Keras' (de)serialization;
2. built by `build`, with the weights it should have, and the output
   shape that `compute_output_shape` gives (what `summary()` shows);
3. called eagerly, with the shapes and dtypes `compute_output_spec`
   gives (`assert_spec_describes`, which the layers' own tests also use
   for their calls with caches and attention scores);
4. called on `keras.Input`s whose batch and lengths are `None`, then in a
   functional model whose `predict_on_batch` (a compiled function with
   those unknown sizes) gives what the eager call gives, and which a
   `.keras` file brings back;
5. Keras' masks (`LayerCase.masks`): after `Embedding(mask_zero=True)`,
   the layer reads the mask attached to each input as its explicit mask
   arguments give it, and passes the output's mask on
   (`GlobalAveragePooling1D` then averages over the real tokens only);
6. one training step of the functional model changes its weights;
7. under `mixed_bfloat16` and `mixed_float16` (`policies()`): outputs in the compute
   dtype, float32 variables, every sub-layer on the policy, and the
   outputs of a compiled call within a few roundings of float32's.

On JAX each op a test runs eagerly is compiled once for each shape and
dtype: the checks call the layer eagerly on the case's inputs only.
"""

import dataclasses
import inspect
import json
import os
from typing import Callable, Optional

import keras
import numpy as np
from keras import ops

from keras_transformer.compat.layers import sublayers

# The precision of each mixed policy's compute dtype (2^-8: bfloat16's 8
# significant bits; 2^-11: float16's).
POLICIES = {"mixed_bfloat16": 2**-8, "mixed_float16": 2**-11}


def policies():
    """`POLICIES`, less `mixed_float16` for JAX on a CPU: XLA's CPU compiler
    has no float16 product summed in float32 ("The precision
    'F16_F16_F32' is not supported by dot_general on CPU"), and float16 is
    a policy for GPUs without bfloat16 (`train(precision="auto")`)."""
    if keras.backend.backend() == "jax":
        import jax

        if jax.default_backend() == "cpu":
            return {"mixed_bfloat16": POLICIES["mixed_bfloat16"]}
    return POLICIES


@dataclasses.dataclass
class LayerCase:
    """A layer, its inputs and what it should give.

    `inputs`: NumPy arrays, the call's positional arguments (a tuple
    argument, as the model's `(source_ids, target_ids)`, as a tuple).
    `masks`: how the layer meets Keras' masks: `None` (it does not), or a
    function `masks -> call arguments` giving, for the boolean padding
    masks of its float sequence inputs, the explicit arguments that say
    the same (`{}`: the layer only passes the mask on). `pad_at_start`:
    padding goes before the tokens in the mask check (after them, a causal
    mask alone would hide it). `precision`: the mixed outputs' bound, in
    roundings of the largest float32 output.
    """

    cls: type
    init_kwargs: dict
    inputs: tuple
    output_shape: tuple
    symbolic_output_shape: tuple
    trainable_weights: int
    call_kwargs: dict = dataclasses.field(default_factory=dict)
    masks: Optional[Callable] = None
    pad_at_start: bool = False
    precision: float = 8
    training: bool = True  # one `fit` step (the model's own `fit` has tests of its own)
    arguments: Optional[set] = None  # the config's keys, if not the constructors' arguments

    def layer(self, **overrides):
        return self.cls(**{**self.init_kwargs, **overrides})


def numpy(x):
    return keras.tree.map_structure(ops.convert_to_numpy, x)


def run_layer_test(case, tmp_path):
    layer = case.layer()
    run_serialization_test(layer, case.arguments)
    run_build_test(case)
    outputs = layer(*case.inputs, **case.call_kwargs)
    assert tuple(outputs.shape) == case.output_shape
    assert keras.backend.standardize_dtype(outputs.dtype) == layer.compute_dtype
    assert_spec_describes(layer, case.inputs, case.call_kwargs, outputs)
    model = run_symbolic_test(case, layer, numpy(outputs), tmp_path)
    if case.masks is not None:
        run_mask_test(case, layer)
    run_precision_test(case, layer, numpy(outputs))
    if case.training:  # last: it changes the weights
        run_training_step(case, model)


def run_serialization_test(layer, arguments=None):
    """The config: the constructor's arguments (those of the package's own
    classes, where it subclasses a Keras layer), JSON, a fixed point of
    `from_config` and of Keras' serialization."""
    config = layer.get_config()
    own = set(config) - {"name", "trainable", "dtype"}
    if arguments is None:
        arguments = set()
        for cls in type(layer).__mro__:
            if not cls.__module__.startswith("keras_transformer"):
                break
            if "__init__" in vars(cls):
                parameters = inspect.signature(cls.__init__).parameters.values()
                arguments |= {p.name for p in parameters if p.name != "self" and p.kind is not p.VAR_KEYWORD}
        if cls not in (keras.layers.Layer, keras.Model):  # a Keras layer's subclass: its own arguments too
            own &= arguments
    assert own == arguments
    text = json.dumps(config, sort_keys=True)
    assert json.dumps(type(layer).from_config(config).get_config(), sort_keys=True) == text
    revived = keras.saving.deserialize_keras_object(json.loads(json.dumps(keras.saving.serialize_keras_object(layer))))
    assert type(revived) is type(layer) and json.dumps(revived.get_config(), sort_keys=True) == text


def build(layer, inputs):
    """`layer` built for `inputs` (the model builds itself when constructed)."""
    if not layer.built:
        shapes = [tuple(x.shape) for x in inputs]
        if len(inspect.signature(layer.build).parameters) == 1:  # as Keras builds it: the first input's shape
            shapes = shapes[:1]
        layer.build(*shapes)
    return layer


def run_build_test(case):
    """Built, with its weights; `compute_output_shape` of the inputs' shapes
    (as `build` took them) is the output's (as `summary()` shows it)."""
    layer = build(case.layer(), case.inputs)
    assert layer.built and len(layer.trainable_weights) == case.trainable_weights
    shapes = [tuple(x.shape) for x in case.inputs] if isinstance(case.inputs[0], np.ndarray) else [
        keras.tree.map_structure(lambda x: tuple(x.shape), case.inputs[0])]
    options = inspect.signature(layer.compute_output_shape).parameters
    kwargs = {k: v for k, v in case.call_kwargs.items() if k in options}
    assert tuple(layer.compute_output_shape(*shapes[: len(options) - len(kwargs)], **kwargs)) == case.output_shape


def symbolic(x):
    """A `keras.Input` like the array `x`, its batch and lengths unknown:
    every size but a float input's last (its width)."""
    x = np.asarray(x)
    if np.issubdtype(x.dtype, np.floating):
        return keras.Input(shape=(None,) * (x.ndim - 2) + (x.shape[-1],), dtype=str(x.dtype))
    return keras.Input(shape=(None,) * (x.ndim - 1), dtype=str(x.dtype))


def run_symbolic_test(case, layer, expected, tmp_path):
    """Symbolic call on unknown sizes; a functional model whose compiled
    call equals the eager one, and which a `.keras` file brings back."""
    inputs = keras.tree.map_structure(symbolic, case.inputs)
    outputs = layer(*inputs, **case.call_kwargs)
    assert tuple(outputs.shape) == case.symbolic_output_shape
    assert keras.backend.standardize_dtype(outputs.dtype) == layer.compute_dtype
    model = keras.Model(keras.tree.flatten(inputs), outputs)
    data = keras.tree.flatten(case.inputs)
    np.testing.assert_allclose(model.predict_on_batch(data), expected, rtol=1e-5, atol=1e-5)
    path = os.path.join(tmp_path, "layer.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert [type(x) for x in loaded.layers] == [type(x) for x in model.layers]
    np.testing.assert_allclose(numpy(loaded(data)), expected, rtol=1e-5, atol=1e-5)
    return model


def assert_spec_describes(layer, inputs, kwargs, outputs):
    """`layer.compute_output_spec` on KerasTensors like `inputs` (and the
    tensors of `kwargs`) has the structure, shapes and dtypes of `outputs`,
    what `layer(*inputs, **kwargs)` returned."""
    spec = keras.tree.map_structure(
        lambda x: keras.KerasTensor(x.shape, keras.backend.standardize_dtype(x.dtype)) if hasattr(x, "shape") else x,
        (inputs, kwargs),
    )
    spec = layer.compute_output_spec(*spec[0], **spec[1])
    described = keras.tree.map_structure(lambda x: (tuple(x.shape), keras.backend.standardize_dtype(x.dtype)), spec)
    given = keras.tree.map_structure(lambda x: (tuple(x.shape), keras.backend.standardize_dtype(x.dtype)), outputs)
    assert keras.tree.flatten(described) == keras.tree.flatten(given) and len(keras.tree.flatten(spec)) == len(
        keras.tree.flatten(outputs)), sorted(kwargs)


def padded_ids(batch, length, vocab, at_start, seed):
    """`(ids, mask)`: token ids in [1, vocab), the second row's last two (or
    first two) padding (0), and the mask `ids != 0`."""
    ids = np.random.default_rng(seed).integers(1, vocab, size=(batch, length))
    ids[1, -2:] = 0
    if at_start:
        ids = ids[:, ::-1].copy()
    return ids, ids != 0


def run_mask_test(case, layer):
    """Keras' masks, attached by `Embedding(mask_zero=True)` to each float
    sequence input, or made by the layer itself from its ids: the same
    outputs as the explicit masks, and the output's mask is the first
    input's (the mean over its real tokens)."""
    vocab = 20
    sequences = [i for i, x in enumerate(case.inputs) if np.asarray(x).ndim == 3]
    own_ids = not sequences  # ReversibleEmbedding(mask_zero=True) on ids
    if own_ids:
        layer = case.layer(mask_zero=True)
        sequences = [0]
    data = [padded_ids(*np.asarray(case.inputs[i]).shape[:2], vocab, case.pad_at_start, seed=i) for i in sequences]
    ids = [keras.Input(shape=(None,), dtype="int32") for _ in sequences]
    if own_ids:
        embedded = ids
    else:
        embeddings = [keras.layers.Embedding(vocab, case.inputs[i].shape[-1], mask_zero=True) for i in sequences]
        embedded = [embedding(x) for embedding, x in zip(embeddings, ids)]
    model = keras.Model(ids, keras.layers.GlobalAveragePooling1D()(layer(*embedded, **case.call_kwargs)))
    attached = numpy(model([x for x, _ in data]))

    if own_ids:
        outputs = numpy(layer(data[0][0], **case.call_kwargs))
    else:
        inputs = list(case.inputs)
        for i, embedding, (x, _) in zip(sequences, embeddings, data):
            inputs[i] = ops.convert_to_tensor(numpy(embedding(x)))  # a new tensor: no mask attached
        outputs = numpy(layer(*inputs, **case.call_kwargs, **case.masks([m for _, m in data])))
    mask = data[0][1][..., None]
    np.testing.assert_allclose(attached, (outputs * mask).sum(1) / mask.sum(1), rtol=1e-5, atol=1e-5)


def run_training_step(case, model):
    """One `fit` step of the functional model moves its weights."""
    before = [ops.convert_to_numpy(w) for w in model.trainable_weights]
    assert len(before) == case.trainable_weights
    target = np.zeros(case.output_shape, "float32")
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    history = model.fit(keras.tree.flatten(case.inputs), target, batch_size=len(target), verbose=0)
    assert np.isfinite(history.history["loss"][0])
    after = [ops.convert_to_numpy(w) for w in model.trainable_weights]
    assert not before or any(not np.array_equal(a, b) for a, b in zip(before, after))


def run_precision_test(case, layer, expected):
    """Mixed precision, in a compiled functional model: dtypes, and outputs
    near float32's."""
    scale = np.abs(expected).max()
    for name, rounding in policies().items():
        policy = keras.dtype_policies.get(name)
        mixed = build(case.layer(dtype=name), case.inputs)
        mixed.set_weights(layer.get_weights())
        inputs = keras.tree.map_structure(symbolic, case.inputs)
        outputs = mixed(*inputs, **case.call_kwargs)
        assert outputs.dtype == policy.compute_dtype
        assert {w.dtype for w in mixed.weights} == {policy.variable_dtype} or not mixed.weights
        for sublayer in sublayers(mixed):
            assert (sublayer.compute_dtype, sublayer.variable_dtype) == (policy.compute_dtype, policy.variable_dtype)
        model = keras.Model(keras.tree.flatten(inputs), outputs)
        outputs = np.asarray(model.predict_on_batch(keras.tree.flatten(case.inputs)), "float32")
        np.testing.assert_allclose(outputs, expected, rtol=0, atol=case.precision * rounding * scale)
