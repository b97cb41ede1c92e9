"""Converts the first zoo model, exported as a SavedModel only, into a preset.

    git archive 0d5dc23 saved_models/tatoeba_en_fr | tar x    # the SavedModel, from the history
    python tools/convert_tatoeba_en_fr.py saved_models/tatoeba_en_fr/1 keras_transformer/zoo/tatoeba_en_fr

The SavedModel (trained with the package as of commit 30b0011) keeps every
weight under its Keras path. That model's attention stored its projections as
`qkv_kernel (d_model, 3, heads, d_k)`, `qkv_bias (3, heads, d_k)` and
`output_kernel (heads, d_k, d_model)`; today's uses `Dense` layers
(`query_key_value`, or `query` and `key_value` for cross-attention, and
`attention_output`) whose kernels are the same numbers reshaped, in the same
(part, head, d_k) order. Every other weight keeps its path and shape.
"""

import argparse
import json
import os

import numpy as np


def old_weights(saved_model_dir):
    """`{keras path: array}` of the SavedModel's variables."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the SentencePiece ops the graph uses

    loaded = tf.saved_model.load(saved_model_dir)
    return {v.name.removesuffix(":0"): v.numpy() for v in loaded._all_variables}


def new_weights(old, path, shape):
    """The value of today's weight `path` from the old weights."""
    layer, _, name = path.rpartition("/")
    block, _, dense = layer.rpartition("/")
    if dense == "query_key_value":
        return old[f"{block}/qkv_{name}"].reshape(shape)
    if dense in ("query", "key_value"):
        parts = slice(0, 1) if dense == "query" else slice(1, 3)
        values = old[f"{block}/qkv_{name}"]
        values = values[parts] if name == "bias" else values[:, parts]
        return values.reshape(shape)
    if dense == "attention_output":
        return old[f"{block}/output_{name}"].reshape(shape)
    if path not in old:
        raise KeyError(f"No weight {path!r} in the SavedModel; it has {sorted(old)}")
    return old[path]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("saved_model", help="the version folder, e.g. saved_models/tatoeba_en_fr/1")
    parser.add_argument("preset", help="the preset directory to write")
    parser.add_argument("--weights-dtype", default="float16", choices=["float32", "float16"])
    args = parser.parse_args(argv)

    from keras_transformer import SubwordTokenizer, Transformer, TransformerConfig

    with open(os.path.join(args.saved_model, "assets.extra", "metadata.json")) as f:
        config = json.load(f)["model_config"]
    fields = {k: v for k, v in config.items() if k in TransformerConfig.__dataclass_fields__}
    model = Transformer(**fields)
    old = old_weights(args.saved_model)
    for weight in model.weights:
        value = new_weights(old, weight.path, tuple(weight.shape))
        weight.assign(value.astype(np.float32))
    print(f"{len(model.weights)} weights from {len(old)} SavedModel variables")
    model.save_to_preset(args.preset, weights_dtype=args.weights_dtype)
    SubwordTokenizer.load(os.path.join(args.saved_model, "assets", "tokenizer.model")).save_to_preset(args.preset)
    print(f"Wrote {args.preset}")


if __name__ == "__main__":
    main()
