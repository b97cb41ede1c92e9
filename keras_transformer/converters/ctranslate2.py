"""Converts a `Transformer` into a CTranslate2 model.

`export_ctranslate2` (`keras-transformer export MODEL --format
ctranslate2`) writes a model folder for CTranslate2's runtime, with the
tokenizer and a note on translating as this package does; `convert` writes
the model alone (`benchmarks/translate_speed.py` compares the engines).
Written against CTranslate2's own specification API
(`ctranslate2.specs.TransformerSpec`, `ModelSpec.save`); `ctranslate2` is
an optional extra (`pip install -e ".[ctranslate2]"`). What differs between
the two and how it is matched:

- Positions. Ours are the paper's sinusoids interleaved (even dimensions
  sin, odd dimensions cos), positions counted from 0 in the encoder and from
  the BOS of the decoder input. CTranslate2 builds its own table when none is
  given, with the sin half first and the cos half second, which is not ours;
  so the converter writes our table (`positional_encoding.sinusoids`,
  `max_length` rows) into `position_encodings.encodings`, which CTranslate2
  indexes from position 0 in both stacks (as it does a learned table).
  A model with learned positions gets its table the same way.
- Embeddings are scaled by sqrt(d_model) in both (`scale_embeddings`),
  unless the model's `scale_embeddings` is off (an imported model's).
- Post-norm (`norm_first=False`): `pre_norm=False`, no final LayerNorm;
  pre-norm models get the final LayerNorms.
- Self-attention: our fused `(d_model, 3 * d_model)` Q/K/V Dense splits into
  Q, K and V blocks along its output axis, each `(d_model, d_model)` with the
  heads side by side; CTranslate2's first self-attention linear is the same
  three blocks stacked (Q, K, V) in its `(out, in)` layout, so each block is
  transposed and stacked. Cross-attention: Q alone, then K and V stacked.
- The output projection is the (shared) embedding matrix, or a matrix of
  its own, with the model's output bias if it has one; the ids the model
  never outputs (`suppressed_ids`) get a bias of `NEG_INF`, so that
  CTranslate2 never outputs them either and the others share their
  probability as in our decoding.
- Vocabulary: the SentencePiece pieces in id order (PAD 0, UNK 1, BOS 2,
  EOS 3 are `<pad> <unk> <s> </s>`), one vocabulary for source and target,
  or the source's and the target's of an imported model.
  CTranslate2 adds nothing to the source: callers append `</s>` themselves
  (`tokens.pack_source`), as `ctranslate2_source_tokens` does.
- Length normalisation is a decoding option, not part of the model: ours is
  GNMT's `((5 + length) / 6) ** alpha`; CTranslate2 divides by
  `length ** length_penalty` (`length` counting EOS in both). No exponent
  makes the two equal at every length; `closest_length_penalty` gives the
  one that ranks hypotheses of about a typical length as ours does, which
  the export's note recommends. `benchmarks/ctranslate2_agreement.py`
  counts the outputs on which the engines then agree, and
  `benchmarks/translate_speed.py` reranks CTranslate2's n-best with ours.
- Output length: ours stops at the source length + `max_extra_length`
  (`keras_transformer.decoding.common.output_lengths`); CTranslate2 takes
  an absolute `max_decoding_length`, which the note sets to the model's
  `max_length`. Long inputs: ours are split at sentence ends
  (`keras_transformer.translation.preprocessor`), CTranslate2 truncates.

Example:

>>> from keras_transformer.converters.ctranslate2 import convert_preset
>>> convert_preset("tatoeba_en_fr", "/tmp/tatoeba_en_fr_ct2")
'/tmp/tatoeba_en_fr_ct2'
>>> import ctranslate2
>>> translator = ctranslate2.Translator("/tmp/tatoeba_en_fr_ct2", compute_type="int8")
"""

import argparse
import json
import os

import numpy as np

from keras_transformer.atomic_files import new_folder
from keras_transformer.decoding.common import NEG_INF, check_alpha, check_length_penalty
from keras_transformer.decoding.defaults import ALPHA, BEAM_SIZE, MAX_EXTRA_LENGTH
from keras_transformer.layers.positional_encoding import sinusoids
from keras_transformer.models import presets
from keras_transformer.tokens import BOS_ID, EOS_ID, UNK_ID
from keras_transformer.translation.preprocessor import is_blank
from keras_transformer.translation.tokenizer import SubwordTokenizer
from keras_transformer.validation import check_positive

# The output length, in tokens with EOS, at which `closest_length_penalty`
# matches the penalties when the export's note recommends one: about a
# sentence's (benchmarks/ctranslate2_agreement.py reports the outputs' mean
# length and how often the engines agree).
TYPICAL_LENGTH = 12

# CTranslate2's beam search ends a sentence once `beam_size * patience` of
# its hypotheses are finished; ours by the exact stop rule goes on while a
# growing hypothesis could still beat the best finished one. At 1,
# CTranslate2's default, it gives up on longer hypotheses that the exact rule
# finds; the note recommends 2.
PATIENCE = 2

# What the export writes beside CTranslate2's own files.
TOKENIZER_FILE = "tokenizer.model"
TARGET_TOKENIZER_FILE = "target_tokenizer.model"  # an imported model's target side
SETTINGS_FILE = "keras_transformer.json"
NOTE_FILE = "README.md"


def require_ctranslate2():
    """Raises `ImportError` naming the extra to install unless `ctranslate2` imports."""
    try:
        import ctranslate2  # noqa: F401
    except ImportError as error:
        raise ImportError(
            'A CTranslate2 model needs the ctranslate2 package: pip install -e ".[ctranslate2]" in the '
            'keras-transformer checkout. '
            f"Received: {error}"
        ) from error


def _numpy(variable):
    from keras import ops

    return np.asarray(ops.convert_to_numpy(variable), dtype="float32")


def _check_float(model):
    for weight in model.weights:
        if "int" in str(weight.dtype):
            raise ValueError(
                "Convert the float model: CTranslate2 quantizes at load "
                "(`compute_type='int8'`). Received a model with the integer weight "
                f"{weight.path!r} ({weight.dtype})."
            )


def _dense(spec, layer):
    """Sets a `LinearSpec` from a Keras Dense: kernel `(in, out)` -> `(out, in)`."""
    _stack(spec, _blocks(layer, 1))


def _blocks(layer, count):
    """A fused Dense's `count` output blocks: [(weight (out, in), bias)]."""
    kernel = _numpy(layer.kernel)  # (in, count * d)
    bias = _numpy(layer.bias) if layer.use_bias else None
    width = kernel.shape[1] // count
    return [
        (
            np.ascontiguousarray(kernel[:, i * width : (i + 1) * width].T),
            None if bias is None else bias[i * width : (i + 1) * width],
        )
        for i in range(count)
    ]


def _stack(spec, blocks):
    """Sets a `LinearSpec` to `blocks` stacked along the output axis."""
    spec.weight = np.concatenate([weight for weight, _ in blocks], axis=0)
    if blocks[0][1] is not None:
        spec.bias = np.concatenate([bias for _, bias in blocks], axis=0)


def _norm(spec, layer):
    spec.gamma = _numpy(layer.gamma)
    spec.beta = _numpy(layer.beta)


def _attention(spec, attention, norm):
    if attention.cross_attention:
        q, k, v = _blocks(attention.query_dense, 1) + _blocks(attention.key_value_dense, 2)
        _stack(spec.linear[0], [q])
        _stack(spec.linear[1], [k, v])
    else:
        _stack(spec.linear[0], _blocks(attention.query_key_value_dense, 3))  # Q, K, V
    _dense(spec.linear[-1], attention.output_dense)
    _norm(spec.layer_norm, norm)


def _feed_forward(spec, layer):
    _dense(spec.linear_0, layer.feed_forward.inner)
    _dense(spec.linear_1, layer.feed_forward.outer)
    _norm(spec.layer_norm, layer.feed_forward_norm)


def _position_table(model, positions):
    config = model.transformer_config
    if positions.learned:
        return _numpy(positions.table)
    return _numpy(sinusoids(0, config.max_length, config.d_model, config.sinusoid_layout))


def _activation(name):
    from ctranslate2.specs import common_spec

    table = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
             "gelu_approximate": common_spec.Activation.GELUTanh, "gelu_sigmoid": common_spec.Activation.GELUSigmoid,
             "silu": common_spec.Activation.SWISH, "swish": common_spec.Activation.SWISH}
    if name not in table:
        raise ValueError(f"CTranslate2 conversion supports the activations {sorted(table)}. "
                         f"Received: activation={name!r}")
    return table[name]


def vocabulary(tokenizer, target=False):
    """The tokenizer's pieces in id order (`tokenizer` may be that list):
    its source side's, or its `target` side's."""
    if isinstance(tokenizer, (list, tuple)):
        pieces = [str(p) for p in tokenizer]
    elif target:
        pieces = tokenizer.id_to_piece(range(tokenizer.target_vocab_size))
    else:
        pieces = tokenizer.source_id_to_piece(range(tokenizer.vocab_size))
    if len(set(pieces)) != len(pieces):
        raise ValueError("The tokenizer's pieces are not unique; CTranslate2 needs a vocabulary of distinct tokens.")
    return pieces


def transformer_spec(model, tokenizer):
    """A validated `ctranslate2.specs.TransformerSpec` holding `model`'s weights.

    `tokenizer` is the model's `SubwordTokenizer`, or its pieces in id order
    (a random model of a preset's shape, for speed: see
    `benchmarks/decode_throughput.py --ctranslate2`).
    """
    require_ctranslate2()
    from ctranslate2.specs import transformer_spec as ts

    config = model.transformer_config
    _check_float(model)
    if not model.built:
        raise ValueError("Build the model (or load its weights) before converting it.")
    source_pieces = vocabulary(tokenizer)
    target_pieces = source_pieces if isinstance(tokenizer, (list, tuple)) else vocabulary(tokenizer, target=True)
    for side, pieces, size in (("source", source_pieces, config.vocab_size),
                               ("target", target_pieces, config.target_vocab_size or config.vocab_size)):
        if len(pieces) != size:
            raise ValueError(f"The tokenizer has {len(pieces)} {side} pieces and the model {size} {side} ids.")
    for name, index in (("unk", UNK_ID), ("bos", BOS_ID), ("eos", EOS_ID)):
        expected = {"unk": "<unk>", "bos": "<s>", "eos": "</s>"}[name]
        for pieces in (source_pieces, target_pieces):
            if pieces[index] != expected:
                raise ValueError(f"Piece {index} is {pieces[index]!r}, expected {expected!r} ({name}).")

    common = dict(pre_norm=config.norm_first, activation=_activation(config.activation))
    encoder = ts.TransformerEncoderSpec(config.num_layers, config.num_heads, **common)
    decoder = ts.TransformerDecoderSpec(config.num_decoder_layers or config.num_layers, config.num_heads, **common)
    spec = ts.TransformerSpec(encoder, decoder)
    spec.config.layer_norm_epsilon = float(config.layer_norm_epsilon)

    encoder.embeddings[0].weight = _numpy(model.embedding.embeddings)  # (vocab, d_model)
    decoder.embeddings.weight = _numpy(model._decoder_embedding.embeddings)  # (target vocab, d_model)
    encoder.scale_embeddings = decoder.scale_embeddings = config.scale_embeddings
    encoder.position_encodings.encodings = _position_table(model, model.encoder_positions)
    decoder.position_encodings.encodings = _position_table(model, model.decoder_positions)
    decoder.projection.weight = _numpy(model._output_embedding.embeddings)
    if config.output_bias or config.suppressed_ids:
        bias = _numpy(model.output_bias) if config.output_bias else np.zeros(len(target_pieces), "float32")
        bias[list(config.suppressed_ids)] = NEG_INF
        decoder.projection.bias = bias

    for layer_spec, layer in zip(encoder.layer, model.encoder_layers):
        _attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_norm)
        _feed_forward(layer_spec.ffn, layer)
    for layer_spec, layer in zip(decoder.layer, model.decoder_layers):
        _attention(layer_spec.self_attention, layer.self_attention, layer.self_attention_norm)
        _attention(layer_spec.attention, layer.cross_attention, layer.cross_attention_norm)
        _feed_forward(layer_spec.ffn, layer)
    if config.norm_first:
        _norm(encoder.layer_norm, model.encoder_norm)
        _norm(decoder.layer_norm, model.decoder_norm)

    spec.register_source_vocabulary(source_pieces)
    spec.register_target_vocabulary(target_pieces)
    spec.validate()
    return spec


def convert(model, tokenizer, output_dir, quantization=None):
    """Writes `model` as a CTranslate2 model in `output_dir` (created); returns it.

    Args:
        model: a float `Transformer` with its weights.
        tokenizer: its `SubwordTokenizer`, or the pieces in id order (the vocabulary).
        output_dir: folder for `model.bin`, `config.json` and the vocabularies.
        quantization: optional CTranslate2 storage type (`"int8"`,
            `"float16"`, ...); `None` keeps float32. The compute type can
            still be chosen at load (`compute_type="int8"`).
    """
    spec = transformer_spec(model, tokenizer)
    spec.optimize(quantization=quantization)
    os.makedirs(output_dir, exist_ok=True)
    spec.save(output_dir)
    return output_dir


def closest_length_penalty(alpha, length=TYPICAL_LENGTH):
    """CTranslate2's `length_penalty` closest to our `alpha` at outputs of
    `length` tokens (EOS included).

    A hypothesis's rank against others of nearby lengths depends on how
    fast the penalty grows with length: `d log(penalty) / d log(length)`,
    which is `length_penalty` for CTranslate2's `length ** length_penalty`
    and `alpha * length / (5 + length)` for GNMT's `((5 + length) / 6) **
    alpha`. Equal at `length`, they rank alike there; shorter outputs then
    get a little more penalty from CTranslate2 than from us, longer a
    little less.

    >>> round(closest_length_penalty(0.6, 12), 3)
    0.424
    """
    return alpha * length / (5.0 + length)


def export_ctranslate2(model, tokenizer, output_dir, beam_size=BEAM_SIZE, alpha=ALPHA, quantization=None,
                       metadata=None, length_penalty="gnmt"):
    """Writes a CTranslate2 model folder: the model (`convert`), the
    tokenizer, `keras_transformer.json` (the decoding settings and
    `metadata`) and `README.md`, a note on translating as this package does.

    Args:
        model: a float `Transformer` with its weights.
        tokenizer: its `SubwordTokenizer`.
        output_dir: the folder to create; it must not exist, or be empty.
            The folder appears whole or not at all.
        beam_size, alpha: the decoding settings the note recommends, alpha
            as CTranslate2's closest `length_penalty`.
        length_penalty: ours, `"gnmt"` or `"huggingface"`, whose
            `length ** alpha` is CTranslate2's own.
        quantization: optional CTranslate2 storage type, e.g. `"int8"`.
        metadata: optional dict added to `keras_transformer.json`.

    Returns:
        `output_dir`.
    """
    check_positive("beam_size", beam_size)
    check_alpha(alpha)
    check_length_penalty(length_penalty)
    # Built beside its final place, then renamed: the folder appears whole or not at all.
    with new_folder(output_dir, "output_dir") as staging:
        convert(model, tokenizer, staging, quantization)
        tokenizer.save(staging)  # tokenizer.model, and an imported model's target_tokenizer.model
        exact = length_penalty == "huggingface"  # CTranslate2's own penalty
        settings = dict(
            beam_size=beam_size, length_penalty=alpha if exact else round(closest_length_penalty(alpha), 2),
            patience=1 if exact else PATIENCE, alpha=alpha, keras_transformer_length_penalty=length_penalty,
            typical_length=TYPICAL_LENGTH, max_extra_length=MAX_EXTRA_LENGTH,
            max_decoding_length=int(model.transformer_config.max_length), source_suffix=["</s>"],
            target_tokenizer=TOKENIZER_FILE if tokenizer.shared else TARGET_TOKENIZER_FILE,
            quantization=quantization, **(metadata or {}),
        )
        with open(os.path.join(staging, SETTINGS_FILE), "w", encoding="utf-8") as f:
            json.dump(settings, f, indent=2)
        with open(os.path.join(staging, NOTE_FILE), "w", encoding="utf-8") as f:
            f.write(_note(settings))
    return output_dir


def _note(settings):
    """The README.md of an exported folder: how to translate as this package does."""
    return f"""# A keras-transformer model for CTranslate2

Written by `keras-transformer export --format ctranslate2`. It translates
with [CTranslate2](https://opennmt.net/CTranslate2/) and SentencePiece, here
from this folder:

```python
import ctranslate2
import sentencepiece

folder = "."
tokenizer = sentencepiece.SentencePieceProcessor(model_file=f"{{folder}}/{TOKENIZER_FILE}")
target = sentencepiece.SentencePieceProcessor(model_file=f"{{folder}}/{settings["target_tokenizer"]}")
translator = ctranslate2.Translator(folder, compute_type="default")
pieces = [p + ["</s>"] for p in tokenizer.encode(["Where is the station?"], out_type=str)]
results = translator.translate_batch(pieces, beam_size={settings["beam_size"]}, length_penalty={settings["length_penalty"]},
                                     patience={settings["patience"]}, max_decoding_length={settings["max_decoding_length"]})
print(target.decode_pieces(results[0].hypotheses[0]))
```

- **The source ends with `</s>`**, which CTranslate2 does not add; the
  target needs nothing (the decoder starts from `<s>`).
- **Greedy search** (`beam_size=1`) gives keras-transformer's greedy
  translations.
- **The length penalty.** keras-transformer divides a hypothesis's
  log-probability by GNMT's `((5 + length) / 6) ** alpha` (unless told
  `length_penalty="huggingface"`: `length ** alpha`, CTranslate2's own, and
  then `length_penalty` above is alpha), here alpha =
  {settings["alpha"]}; CTranslate2 divides it by `length ** length_penalty`.
  No `length_penalty` equals ours at every length. The closest is
  `alpha * L / (5 + L)`, which makes the two penalties grow alike at
  outputs of L tokens: {settings["length_penalty"]} at L = {settings["typical_length"]}, a sentence's
  length (`keras_transformer.converters.ctranslate2.closest_length_penalty`).
  Beam search then ranks hypotheses as ours does, but for some whose
  lengths differ much. For long outputs, compute it at their length.
- **Patience.** CTranslate2 ends a sentence's beam search once
  `beam_size * patience` hypotheses are finished; keras-transformer once
  its best candidate has ended (its default, `stop="early"`), or, with
  `stop="exact"`, while a growing hypothesis could still beat the best
  finished one. `patience={settings["patience"]}` lets CTranslate2 find the longer
  hypotheses that the exact rule finds.
- **Length limits.** keras-transformer stops an output at its source's
  length (with `</s>`) + {settings["max_extra_length"]} tokens; CTranslate2 takes one
  `max_decoding_length` for the batch, set above to the model's
  `max_length`: cut an output at that length to have keras-transformer's. keras-transformer splits a source
  over its budget at sentence ends; CTranslate2 truncates one.

`{SETTINGS_FILE}` holds these settings.
"""


def convert_preset(preset, output_dir, quantization=None):
    """`convert` for a preset's (float32) model and tokenizer."""
    return convert(presets.load_model(preset), SubwordTokenizer.from_preset(preset), output_dir, quantization)


def ctranslate2_source_tokens(tokenizer, sentences):
    """CTranslate2's input for `sentences`: each sentence's pieces and `</s>`
    (`tokens.pack_source`); a blank sentence gives `[]` (translate it to "")."""
    encoded = tokenizer.encode(list(sentences)) if sentences else []
    return [
        tokenizer.source_id_to_piece(ids) + ["</s>"] if not is_blank(s) and ids else []
        for s, ids in zip(sentences, encoded)
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Converts a preset to a CTranslate2 model.")
    parser.add_argument("preset", help="a shipped preset name or a preset directory")
    parser.add_argument("output_dir")
    parser.add_argument("--quantization", default=None, help="CTranslate2 storage type, e.g. int8")
    args = parser.parse_args(argv)
    print(convert_preset(args.preset, args.output_dir, args.quantization))


if __name__ == "__main__":
    main()
