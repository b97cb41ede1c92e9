"""The Transformer: an encoder-decoder model for sequence transduction."""

import dataclasses
import numbers

import keras
from keras import ops

from keras_transformer.compat.layers import collections_deferred, has_values, in_shape_inference, sublayers
from keras_transformer.compat.training import TrainerWorkarounds
from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.feed_forward import serialized_activation
from keras_transformer.layers.positional_encoding import PositionalEncoding, check_sinusoid_layout
from keras_transformer.layers.reversible_embedding import ReversibleEmbedding
from keras_transformer.models import presets
from keras_transformer.models.config import TransformerConfig, architecture_config
from keras_transformer.tokens import PAD_ID
from keras_transformer.validation import (
    check_bool,
    check_positive,
    check_positive_number,
    check_rate,
)


def padding_mask(ids):
    """`True` for real tokens, `False` for padding: `(batch, length)`."""
    return ops.not_equal(ids, PAD_ID)


def _as_ids(name, ids):
    """Token ids `(batch, length)` as int32; any other integer dtype is cast.

    Float ids are refused, as their fractions would be cut silently, but in
    Keras' shape inference (keras_transformer/compat/layers.py): under a
    `tf.distribute` strategy Keras builds the model's loss and metrics from
    a batch averaged across replicas, whose ids are float32.
    """
    ids = ops.convert_to_tensor(ids)
    if len(ids.shape) != 2:
        raise ValueError(
            f"`{name}` must be token ids of shape (batch, length). "
            f"Received: {name}.shape={tuple(ids.shape)}"
        )
    dtype = keras.backend.standardize_dtype(ids.dtype)
    if "int" not in dtype and not ("float" in dtype and in_shape_inference()):
        raise TypeError(f"`{name}` must hold integer token ids. Received: {name} of dtype {dtype}")
    return ids if dtype == "int32" else ops.cast(ids, "int32")


def _check_id_values(name, ids, vocab_size):
    """Raises a ValueError naming `name` if an id of `ids` is outside `[0,
    vocab_size)`, where the ids hold values (an eager call): in a traced
    function they are placeholders, and a check would add ops and a wait
    for the device to every step (see docs/training.md)."""
    if not has_values(ids):
        return
    values = ops.convert_to_numpy(ids)
    if values.size and (values.min() < 0 or values.max() >= vocab_size):
        raise ValueError(
            f"`{name}` must hold token ids in [0, {vocab_size}) (the vocabulary's size). Received: {name} with "
            f"ids from {values.min()} to {values.max()}"
        )


def _checked(config):
    """`config` checked (`ValueError`s name the argument), its integers as
    Python ints: NumPy integers pass the checks, and Keras' own layers take
    Python ints."""
    for name in ("vocab_size", "num_layers", "d_model", "num_heads", "d_ff", "max_length"):
        check_positive(name, getattr(config, name))
    check_rate("dropout_rate", config.dropout_rate)
    check_rate("attention_dropout_rate", config.attention_dropout_rate)
    if config.target_vocab_size is not None:
        check_positive("target_vocab_size", config.target_vocab_size)
    for name in ("num_decoder_layers", "decoder_d_ff"):
        if getattr(config, name) is not None:
            check_positive(name, getattr(config, name))
    for name in ("learned_positions", "norm_first", "scale_embeddings", "tie_output_embeddings", "output_bias"):
        check_bool(name, getattr(config, name))
    check_positive_number("layer_norm_epsilon", config.layer_norm_epsilon)
    check_sinusoid_layout(config.sinusoid_layout)
    ints = {name: int(getattr(config, name)) for name in ("vocab_size", "num_layers", "d_model", "num_heads", "d_ff",
                                                           "max_length", "target_vocab_size", "num_decoder_layers",
                                                           "decoder_d_ff")
            if getattr(config, name) is not None}
    config = dataclasses.replace(config, **ints, activation=serialized_activation(config.activation),
                                 suppressed_ids=_suppressed_ids(config))
    if config.d_model % 2:  # positional encodings come in (sin, cos) pairs
        raise ValueError(f"Argument `d_model` must be even. Received: d_model={config.d_model}")
    if config.d_model % config.num_heads:
        raise ValueError(
            "Argument `d_model` must be divisible by `num_heads`. "
            f"Received: d_model={config.d_model}, num_heads={config.num_heads}"
        )
    return config


def _suppressed_ids(config):
    """`config.suppressed_ids` as a sorted tuple of ints, each an id of the
    output vocabulary (a JSON config gives a list)."""
    ids = config.suppressed_ids
    output_vocab = config.target_vocab_size or config.vocab_size
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)) or any(
            isinstance(i, bool) or not isinstance(i, numbers.Integral) or not 0 <= i < output_vocab for i in ids):
        raise ValueError(f"Argument `suppressed_ids` must be a list of token ids in [0, {output_vocab}) (the "
                         f"output vocabulary). Received: suppressed_ids={ids!r}")
    return tuple(sorted({int(i) for i in ids}))


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(TrainerWorkarounds, keras.Model):
    """The Transformer of "Attention Is All You Need".

    `model((source_ids, target_input_ids))` returns next-token logits
    `(batch, target_length, vocab_size)`. Token id 0 is padding and is masked
    in every attention: the model makes its masks from the ids, and its
    inputs carry no Keras masks. Ids are integers (float ids are an error);
    ids outside the vocabulary are an error where the ids hold values (an
    eager call), not inside a traced function (`fit`, `predict`), where a
    check would cost every step an op and a wait for the device. Source and target share one embedding matrix, which
    is also the pre-softmax projection (section 3.4), unless
    `target_vocab_size` asks for separate vocabularies; the target embedding
    is then still shared with the projection.

    The model is built when constructed, and it is a plain `keras.Model`:
    `compile`, `fit`, `evaluate` and `predict` take `((source_ids,
    target_input_ids), labels)` batches (`keras_transformer.tokens` packs
    them) on one device or under a distribution strategy, and `save`,
    `keras.saving.load_model` and `quantize("int8")` work as for any
    Keras model.

    Args (the fields of `TransformerConfig`, which holds their defaults):
        vocab_size: int. Size of the shared (or source) vocabulary.
        num_layers: int. Encoder layers, and as many decoder layers.
        d_model: int. Model width.
        num_heads: int. Attention heads; must divide `d_model`.
        d_ff: int. Inner width of the feed-forward networks.
        dropout_rate: float in [0, 1). Dropout on sub-layer outputs and on
            the sums of embeddings and positions.
        attention_dropout_rate: float in [0, 1). Dropout on the attention
            weights; the paper uses none.
        max_length: int. Longest source or target sequence.
        target_vocab_size: optional int. A separate target vocabulary.
        learned_positions: bool. Learned position embeddings (Table 3, E).
        norm_first: bool. Pre-norm residual blocks (adds a final LayerNorm
            to the encoder and the decoder).
        activation: feed-forward activation: a Keras activation, by name
            or as the function, or a registered function; the config holds
            its name.
        layer_norm_epsilon: float.
        num_decoder_layers: optional int. Decoder layers, if not
            `num_layers`.
        decoder_d_ff: optional int. The decoder's feed-forward width, if
            not `d_ff`.
        sinusoid_layout: where the sinusoids' sines and cosines lie
            (`layers.positional_encoding.SINUSOID_LAYOUTS`): the paper's
            `"interleaved"`, or `"halves"` or `"marian"` as imported models
            have them.
        scale_embeddings: bool. Scale the embeddings by sqrt(d_model).
        tie_output_embeddings: bool. The pre-softmax projection is the
            (target) embedding matrix (section 3.4); False: a matrix of its
            own, `output_embedding`.
        output_bias: bool. Add a learned bias to the logits.
        suppressed_ids: token ids that decoding never outputs (their
            probability goes to the other tokens): an imported Marian
            model's PAD and BOS, which Marian never outputs.
        **kwargs: Standard model arguments (`name`, `dtype`, ...).

    Example:

    >>> model = Transformer.from_architecture("tiny", vocab_size=100)
    >>> source = keras.ops.array([[5, 6, 7, 3, 0]])
    >>> target = keras.ops.array([[2, 8, 9]])
    >>> model((source, target)).shape
    (1, 3, 100)
    >>> model.compile(optimizer=paper_optimizer(128), loss=LabelSmoothedCrossEntropy())
    >>> model.fit((sources, target_inputs), labels, batch_size=64)

    Reference: Vaswani et al., 2017, https://arxiv.org/abs/1706.03762.
    """

    def __init__(self, vocab_size, **kwargs):
        # The model's arguments and their defaults are `TransformerConfig`'s;
        # the rest are Keras' (`name`, `dtype`, ...).
        fields = [field.name for field in dataclasses.fields(TransformerConfig)]
        config = TransformerConfig(vocab_size, **{name: kwargs.pop(name) for name in fields if name in kwargs})
        super().__init__(**kwargs)
        self.transformer_config = c = _checked(config)
        dtype = self.dtype_policy
        embedding = dict(
            output_dim=c.d_model,
            # Unit variance after the sqrt(d_model) scaling.
            embeddings_initializer=keras.initializers.RandomNormal(stddev=c.d_model**-0.5),
            dtype=dtype,
        )
        self.embedding = ReversibleEmbedding(c.vocab_size, name="embedding", **embedding)
        self.target_embedding = self.output_embedding = None
        if c.target_vocab_size is not None:
            self.target_embedding = ReversibleEmbedding(
                c.target_vocab_size, name="target_embedding", **embedding
            )
        if not c.tie_output_embeddings:
            self.output_embedding = ReversibleEmbedding(
                c.target_vocab_size or c.vocab_size, name="output_embedding", **embedding
            )
        self.output_bias = None  # a weight, made in `build`
        positions = dict(max_length=c.max_length, learned=c.learned_positions, layout=c.sinusoid_layout,
                         scale=c.scale_embeddings, dtype=dtype)
        self.encoder_positions = PositionalEncoding(name="encoder_positions", **positions)
        self.decoder_positions = PositionalEncoding(name="decoder_positions", **positions)
        self.embedding_dropout = keras.layers.Dropout(c.dropout_rate, dtype=dtype, name="embedding_dropout")
        block = dict(
            d_model=c.d_model,
            num_heads=c.num_heads,
            d_ff=c.d_ff,
            dropout_rate=c.dropout_rate,
            attention_dropout_rate=c.attention_dropout_rate,
            activation=c.activation,
            norm_first=c.norm_first,
            layer_norm_epsilon=c.layer_norm_epsilon,
            dtype=dtype,
        )
        self.encoder_layers = [
            EncoderLayer(name=f"encoder_layer_{i}", **block) for i in range(c.num_layers)
        ]
        decoder_block = dict(block, d_ff=c.decoder_d_ff or c.d_ff)
        self.decoder_layers = [
            DecoderLayer(name=f"decoder_layer_{i}", **decoder_block) for i in range(c.num_decoder_layers or c.num_layers)
        ]
        self.encoder_norm = self.decoder_norm = None
        if c.norm_first:  # pre-norm stacks end with a LayerNorm
            norm = dict(epsilon=c.layer_norm_epsilon, dtype=dtype)
            self.encoder_norm = keras.layers.LayerNormalization(name="encoder_norm", **norm)
            self.decoder_norm = keras.layers.LayerNormalization(name="decoder_norm", **norm)
        # Built now, as keras-hub builds its backbones: weights can be
        # loaded, counted or quantized before the first call.
        self.build(((None, None), (None, None)))

    @classmethod
    def from_architecture(cls, architecture, vocab_size, **overrides):
        """A new, untrained model with the hyper-parameters of an architecture.

        Architectures: `"tiny"`, `"small"`, `"base"` and `"big"` (see
        `keras_transformer.models.config.ARCHITECTURES`); keyword arguments
        override any field of `TransformerConfig`.

        Example:

        >>> model = Transformer.from_architecture("base", vocab_size=37000)
        """
        keras_kwargs = {k: overrides.pop(k) for k in ("name", "dtype") if k in overrides}
        config = architecture_config(architecture, vocab_size=vocab_size, **overrides)
        return cls(**dataclasses.asdict(config), **keras_kwargs)

    @classmethod
    def from_preset(cls, preset, load_weights=True, dtype=None):
        """A trained model from a preset: its config and weights.

        Args:
            preset: a shipped preset name (`keras_transformer.models.presets.list_presets()`,
                e.g. `"tatoeba_en_fr"`) or a directory written by `save_to_preset`;
                or a Marian model converted as it loads: a Hugging Face Marian
                folder, a Marian folder or `hf://org/name`
                (`keras_transformer.translation.marian`).
            load_weights: bool. False: the preset's architecture, untrained.
            dtype: optional dtype policy, e.g. `"mixed_bfloat16"` to fine-tune.

        Example:

        >>> model = Transformer.from_preset("tatoeba_en_fr")
        """
        return presets.load_model(preset, load_weights=load_weights, dtype=dtype)

    def save_to_preset(self, preset_dir, weights_dtype="float32", model_card=None):
        """Writes the model's config and weights into a preset directory.

        `Transformer.from_preset(preset_dir)` loads it back; with the
        tokenizer's `save_to_preset`, `Translator.from_preset` too.
        `weights_dtype="float16"` halves the file (see `keras_transformer.models.presets`).
        """
        return presets.save_model(self, preset_dir, weights_dtype=weights_dtype, model_card=model_card)

    def build(self, input_shape=None):
        if self.built:  # built in __init__; Keras calls build again when loading
            return
        source_shape, target_shape = input_shape
        hidden = (None, None, self.transformer_config.d_model)
        self.embedding.build(source_shape)
        if self.target_embedding is not None:
            self.target_embedding.build(target_shape)
        if self.output_embedding is not None:
            self.output_embedding.build(target_shape)
        if self.transformer_config.output_bias:
            vocab = self.transformer_config.target_vocab_size or self.transformer_config.vocab_size
            self.output_bias = self.add_weight(name="output_bias", shape=(vocab,), initializer="zeros")
        self.encoder_positions.build(hidden)
        self.decoder_positions.build(hidden)
        self.embedding_dropout.build(hidden)
        for layer in self.encoder_layers + self.decoder_layers:
            layer.build(hidden)
        if self.transformer_config.norm_first:
            self.encoder_norm.build(hidden)
            self.decoder_norm.build(hidden)
        self.built = True

    @property
    def _decoder_embedding(self):
        return self.target_embedding or self.embedding

    @property
    def _output_embedding(self):
        """The pre-softmax projection's matrix: the decoder's embedding unless untied."""
        return self.output_embedding or self._decoder_embedding

    def encode(self, source_ids, training=None):
        """Encoder output `(batch, source_length, d_model)`."""
        source_ids = _as_ids("source_ids", source_ids)
        _check_id_values("source_ids", source_ids, self.transformer_config.vocab_size)
        mask = padding_mask(source_ids)  # (batch, source_length)
        x = self.encoder_positions(self.embedding(source_ids))
        x = self.embedding_dropout(x, training=training)
        for layer in self.encoder_layers:
            x = layer(x, padding_mask=mask, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x  # (batch, source_length, d_model)

    def init_cache(self, memory, max_length=None):
        """A key/value cache for decoding, one row a sentence of `memory`.

        Returns a dict:
        - `"self_attention"`: per decoder layer, a `(key, value)` pair
          `(batch, num_heads, length, d_k)` filled in step by step: zeros
          of `max_length` positions, written at each step's position; or,
          with `max_length=None`, of no positions, each step's appended
          (the cache grows with the output, as shapes that change allow:
          TensorFlow without XLA, PyTorch);
        - `"cross_attention"`: per decoder layer, the keys and values of
          `memory` `(batch, num_heads, source_length, d_k)`, computed once;
          `decode` takes the cache with several target rows a sentence
          (beam search's hypotheses), its own rows serving them all;
        - `"output_projection"`: the output embedding transposed `(d_model,
          vocab)`, once for every step's product (absent for an int8
          table, whose product is its own).

        The decoding loop gives the self-attention part as many rows as a
        sentence has hypotheses (`keras_transformer.decoding.loop`).
        """
        limit = self.transformer_config.max_length
        if max_length is not None and (
            isinstance(max_length, bool) or not isinstance(max_length, numbers.Integral)
            or not 1 <= max_length <= limit
        ):
            # Past `max_length` there are no positions: a position given as
            # a tensor in compiled decoding could not be checked later.
            raise ValueError(
                f"Argument `max_length` must be None or an integer in [1, {limit}] (the "
                f"model's max_length). Received: max_length={max_length!r}"
            )
        batch = ops.shape(memory)[0]
        heads = self.transformer_config.num_heads
        shape = (batch, heads, 0 if max_length is None else int(max_length), self.transformer_config.d_model // heads)
        cache = {
            "self_attention": [
                (ops.zeros(shape, dtype=self.compute_dtype), ops.zeros(shape, dtype=self.compute_dtype))
                for _ in self.decoder_layers
            ],
            "cross_attention": [
                layer.cross_attention.project_key_value(memory)
                for layer in self.decoder_layers
            ],
        }
        if self._output_embedding.quantization_mode is None:
            table = ops.cast(self._output_embedding.embeddings, self.compute_dtype)  # (vocab, d_model)
            cache["output_projection"] = ops.transpose(table)
        return cache

    def extend_cache(self, cache, max_length):
        """`cache` (from `init_cache`) made to hold `max_length` target tokens.

        The self-attention keys and values are padded with zeros up to
        `max_length` positions; what they hold, and the cross-attention part,
        are unchanged. Decoding starts with a short cache and extends it
        only when a sentence needs more positions (see
        `keras_transformer.decoding.common.cache_lengths`), so that every step
        reads, writes and reorders a cache near the length decoded so far.
        """

        def pad(x):  # (batch, heads, length, d_k) -> (batch, heads, max_length, d_k)
            extra = int(max_length) - x.shape[2]
            if extra < 0:
                raise ValueError(
                    f"Argument `max_length` must be at least the cache's length {x.shape[2]}. "
                    f"Received: max_length={max_length!r}"
                )
            return x if extra == 0 else ops.pad(x, [(0, 0), (0, 0), (0, extra), (0, 0)])

        return {**cache, "self_attention": [tuple(pad(x) for x in pair) for pair in cache["self_attention"]]}

    def decode(
        self,
        target_ids,
        memory,
        source_mask,
        cache=None,
        cache_update_index=None,
        return_attention_scores=False,
        training=None,
    ):
        """Next-token logits `(batch, target_length, vocab_size)`.

        Args:
            target_ids: int tensor `(batch, target_length)`: the decoder input
                (BOS, y1, y2, ...), or the newest token(s) with a cache.
            memory: encoder output `(batch, source_length, d_model)`.
            source_mask: boolean `(batch, source_length)`, from
                `padding_mask(source_ids)`; with a cache, that of the
                cache's cross-attention rows.
            cache: optional dict from `init_cache()`. The decoder then reads
                earlier positions from it instead of recomputing them, and
                `target_ids` may have several rows for each of its rows
                (consecutive: the hypotheses of one sentence).
            cache_update_index: position of `target_ids[:, 0]` in the target
                sequence, for a cache of fixed length; `None` appends to a
                cache from `init_cache(memory)`, whose length is the position.
            return_attention_scores: also return, per decoder layer, the
                cross-attention weights `(batch, num_heads, target_length,
                source_length)`.
            training: bool. Enables dropout.

        Returns:
            `logits`, or `(logits, cache)`, `(logits, scores)` or
            `(logits, cache, scores)`.
        """
        target_ids = _as_ids("target_ids", target_ids)
        if cache is None:
            start = 0
        elif cache_update_index is None:
            start = ops.shape(cache["self_attention"][0][0])[2]  # the positions cached so far
        else:
            start = cache_update_index
        # A decoding step, one token a row, runs on rows `(batch, d_model)`:
        # each `Dense` is then one matrix product, not a `tensordot` of
        # reshapes (as Keras' TensorFlow `matmul` does on 3-D inputs).
        single = cache is not None and target_ids.shape[1] == 1 and not return_attention_scores
        if single:
            target_ids = ops.reshape(target_ids, (-1,))  # (batch,)
        x = self.decoder_positions(self._decoder_embedding(target_ids), start_index=start)
        x = self.embedding_dropout(x, training=training)
        new_cache = {**(cache or {}), "self_attention": []}
        all_scores = []
        for i, layer in enumerate(self.decoder_layers):
            outputs = layer(
                x,
                None if cache is not None else memory,
                memory_mask=source_mask,
                self_attention_cache=None if cache is None else cache["self_attention"][i],
                cross_attention_cache=None if cache is None else cache["cross_attention"][i],
                cache_update_index=cache_update_index,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            x = outputs[0]
            if cache is not None:
                new_cache["self_attention"].append(outputs[1])
            if return_attention_scores:
                all_scores.append(outputs[-1])
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        with keras.name_scope("output_projection"):
            if cache is not None and "output_projection" in cache:
                logits = ops.matmul(x, cache["output_projection"])  # (batch, [length,] vocab)
                if self.output_bias is not None:
                    logits = logits + ops.cast(self.output_bias, logits.dtype)
            else:
                logits = self.project(x)
        if single:
            logits = ops.expand_dims(logits, 1)  # (batch, 1, vocab)

        results = (logits,)
        if cache is not None:
            results += (new_cache,)
        if return_attention_scores:
            results += (all_scores,)
        return results[0] if len(results) == 1 else results

    def project(self, x):
        """Pre-softmax logits `(batch, length, vocab_size)` of decoder states
        `x`, with the (shared) embedding matrix, and the output bias if any."""
        logits = self._output_embedding(x, reverse=True)
        if self.output_bias is not None:
            logits = logits + ops.cast(self.output_bias, logits.dtype)
        return logits

    def call(self, inputs, training=None):
        if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
            raise ValueError(
                "Transformer expects inputs `(source_ids, target_input_ids)`. "
                f"Received: {type(inputs).__name__}"
            )
        source_ids, target_ids = inputs
        source_ids = _as_ids("source_ids", source_ids)
        target_ids = _as_ids("target_ids", target_ids)
        _check_id_values("target_ids", target_ids, self._output_embedding.input_dim)
        batch = (source_ids.shape[0], target_ids.shape[0])
        # Sizes that are not ints (None, a JAX trace's symbolic sizes) are
        # not known yet.
        if all(isinstance(b, int) for b in batch) and batch[0] != batch[1]:
            raise ValueError(
                "`source_ids` and `target_ids` must have the same batch size. "
                f"Received: source_ids.shape={tuple(source_ids.shape)}, target_ids.shape={tuple(target_ids.shape)}"
            )
        memory = self.encode(source_ids, training=training)
        return self.decode(target_ids, memory, padding_mask(source_ids), training=training)

    def compute_output_shape(self, input_shape):
        if not isinstance(input_shape, (tuple, list)) or len(input_shape) != 2 or any(
                not isinstance(shape, (tuple, list)) or len(shape) != 2 for shape in input_shape):
            raise ValueError(
                "Transformer expects inputs `(source_ids, target_input_ids)`, each of shape (batch, length). "
                f"Received: inputs of shape {input_shape}"
            )
        (batch, _), (target_batch, target_length) = input_shape
        return (batch if batch is not None else target_batch, target_length, self._output_embedding.input_dim)

    def quantize(self, mode=None, **kwargs):
        """`keras.Model.quantize`, with Keras' garbage collection per dropped
        weight deferred to one at the end (`keras_transformer/compat/layers.py`).
        What is quantized, and how, is Keras'."""
        with collections_deferred():
            super().quantize(mode, **kwargs)

    def get_config(self):
        # A quantized model records its layers' policies in a DTypePolicyMap
        # under their paths; built from it, each layer looks its own up and
        # is created quantized. Keras leaves this to subclassed models
        # (keras-team/keras#19381).
        policy = keras.dtype_policies.DTypePolicyMap(default_policy=self.dtype_policy)
        for layer in sublayers(self):
            if layer.quantization_mode is not None:
                policy[layer.path] = layer.dtype_policy
        if not len(policy):
            policy = self.dtype_policy
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(policy),
        }
        config.update(dataclasses.asdict(self.transformer_config))
        return config
