"""A SavedModel folder as the export writes it and the loader and the
server read it: TF Serving's numbered version folders, the export's
settings (`assets.extra/metadata.json`) and the model and tokenizer it
holds beside its graph (`read_translator_parts`). One module for the
folder's layout: `keras_transformer.export.saved_model` writes it,
`Translator.from_saved_model` and `keras_transformer.serving` read it.
"""

import json
import os

from keras_transformer.decoding.common import ensure_built
from keras_transformer.models.transformer import Transformer
from keras_transformer.translation.tokenizer import SubwordTokenizer


def next_version(export_dir):
    """1 + the highest numbered version folder in `export_dir` (or 1)."""
    if not os.path.isdir(export_dir):
        return 1
    versions = [int(d) for d in os.listdir(export_dir) if d.isdigit()]
    return max(versions, default=0) + 1


def latest_version(model_dir):
    """The highest numbered version folder of a TF Serving model folder."""
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"No model folder at {model_dir!r}")
    if os.path.exists(os.path.join(model_dir, "saved_model.pb")):
        return os.path.basename(os.path.normpath(model_dir)), model_dir
    versions = [d for d in os.listdir(model_dir) if d.isdigit()]
    if not versions:
        raise FileNotFoundError(
            f"{model_dir!r} holds no numbered version folder with a saved_model.pb "
            "(expected <name>/<version>/saved_model.pb)"
        )
    version = max(versions, key=int)
    return version, os.path.join(model_dir, version)


def read_metadata(version_dir):
    """The SavedModel's `assets.extra/metadata.json` (its export settings), or {}."""
    try:
        with open(os.path.join(version_dir, "assets.extra", "metadata.json"), encoding="utf-8") as f:
            metadata = json.load(f)
    except (OSError, ValueError):
        return {}
    return metadata if isinstance(metadata, dict) else {}


def read_translator_parts(path):
    """`(model, tokenizer, settings)` of the `Translator` a SavedModel was
    traced from (`Translator.from_saved_model`): its model, from the config
    and weights the SavedModel holds, its tokenizer
    (`assets/tokenizer.model`, and `assets/target_tokenizer.model` if it
    has one) and its export settings (`metadata.json`,
    the decoding settings among them). The graph is not loaded.

    Args:
        path: a model folder (its latest version) or one version folder.
    """
    import tensorflow as tf  # not on the import path under JAX or PyTorch

    _, version_dir = latest_version(path)
    metadata = read_metadata(version_dir)
    if not {"model_config", "weights"} <= set(metadata):
        raise ValueError(
            f"{version_dir!r} has no model config and weight names in assets.extra/metadata.json: another tool "
            "or an older keras_transformer exported it. Re-export it, or serve it with `keras-transformer serve` "
            "or TF Serving. "
            f"Received: metadata keys {sorted(metadata)}"
        )
    model = Transformer.from_config(metadata["model_config"])
    ensure_built(model)
    paths = [v.path for v in model.weights]
    if paths != metadata["weights"]:
        raise ValueError(f"The SavedModel's weights at {version_dir!r} are not those of its model config. "
                         f"Received: {len(metadata['weights'])} weights, the config's model has {len(paths)}")
    # The checkpoint's root holds the list `weights`, the model's first (`_write_graph`).
    checkpoint = tf.train.Checkpoint(weights=[v.value for v in model.weights])
    try:
        status = checkpoint.read(os.path.join(version_dir, "variables", "variables"))
        status.expect_partial().assert_existing_objects_matched()
        tokenizer = SubwordTokenizer.load(os.path.join(version_dir, "assets"))
    except Exception as error:  # IndexError, tf.errors.OpError, ... on a damaged file
        raise OSError(f"Cannot load the SavedModel at {version_dir!r}: {error}") from error
    return model, tokenizer, metadata
