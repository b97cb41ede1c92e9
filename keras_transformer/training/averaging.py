"""Checkpoint averaging (section 6.1): the mean of the last N checkpoints.

The paper averages the last 5 checkpoints (written at 10-minute intervals) for
the base model and the last 20 for the big one. `average_checkpoints`
reads `.weights.h5` files with h5py, averages every model variable in
float64, casts back to its dtype, and writes a weights file without the
optimizer state that `model.load_weights` reads.

Example:

>>> average_checkpoints("runs/base/checkpoints", "runs/base/average.weights.h5", last=5)
>>> model.load_weights("runs/base/average.weights.h5")
"""

import os

import numpy as np

from keras_transformer.atomic_files import replacing
from keras_transformer.training.checkpoints import latest_checkpoint, list_checkpoints, verify_checkpoint

_SKIPPED_GROUPS = ("optimizer",)


def checkpoints_to_average(directory, last):
    """Weights paths of the newest `last` intact checkpoints, oldest first."""
    if last < 1:
        raise ValueError(f"Argument `last` must be >= 1. Received: last={last}")
    intact = [c for c in list_checkpoints(directory) if verify_checkpoint(c) is None]
    if not intact:
        latest_checkpoint(directory)  # warns about each damaged one
        raise FileNotFoundError(f"No intact checkpoint in {directory!r}.")
    return [c.weights_path for c in intact[-last:]]


def average_checkpoints(checkpoints, output_path, last=5):
    """Writes the element-wise mean of model weights to `output_path`.

    Args:
        checkpoints: a checkpoint directory (then the newest `last` intact
            checkpoints are used) or a list of `.weights.h5` paths.
        output_path: str ending in `.weights.h5`.
        last: int. How many checkpoints, with a directory.

    Returns:
        The list of averaged paths.
    """
    import h5py

    if isinstance(checkpoints, (str, os.PathLike)):
        paths = checkpoints_to_average(os.fspath(checkpoints), last)
    else:
        paths = [os.fspath(p) for p in checkpoints]
    if not paths:
        raise ValueError("No checkpoints to average.")
    if not str(output_path).endswith(".weights.h5"):
        raise ValueError(f"The output must end in .weights.h5. Received: output_path={output_path!r}")
    files = [h5py.File(p, "r") for p in paths]
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    try:
        with replacing(output_path, suffix=".weights.h5") as temporary, h5py.File(temporary, "w") as out:
            _copy_mean(files, out)
    finally:
        for f in files:
            f.close()
    return paths


def _copy_mean(groups, out):
    import h5py

    first = groups[0]
    out.attrs.update(dict(first.attrs))
    for name, item in first.items():
        if name in _SKIPPED_GROUPS and out.name == "/":
            continue
        if isinstance(item, h5py.Group):
            _copy_mean([g[name] for g in groups], out.create_group(name))
            continue
        values = [np.asarray(g[name]) for g in groups]
        if any(v.shape != values[0].shape for v in values):
            raise ValueError(f"Checkpoints disagree on the shape of {item.name}.")
        if np.issubdtype(values[0].dtype, np.floating):
            mean = np.mean(np.stack(values).astype("float64"), axis=0).astype(values[0].dtype)
        else:  # integer bookkeeping: keep the newest
            mean = values[-1]
        dataset = out.create_dataset(name, data=mean)
        dataset.attrs.update(dict(item.attrs))
