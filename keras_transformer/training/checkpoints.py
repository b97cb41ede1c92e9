"""Numbered training checkpoints, written atomically and verified on read.

One checkpoint of global step `s` is two files in a directory:

    ckpt-0000001000.weights.h5   model + optimizer (`model.save_weights`)
    ckpt-0000001000.json         step, epoch, size and SHA-256 of the
                                 weights, dropout RNG states

Each file is written to a temporary name, flushed to disk and moved into
place with `os.replace`; the JSON goes last, so a checkpoint without it (a
crash mid-write) does not exist. On reading, a checkpoint whose weights do
not match the recorded size and SHA-256, or do not open, is reported and
the previous one is used. The checkpoint found is read once: its metadata
travel with it, so that pruning its files later changes nothing for the
run that resumed from it.

HDF5 does not survive a write that fails: a dataset whose flush fails is
left half closed, and closing its file later crashes the process
(h5py/h5py#914). So a checkpoint is written only where its bytes fit (the
free space and the file size limit, against the last checkpoint's size or
the variables' bytes); otherwise writing it is a plain `OSError`
(`ENOSPC`, `EFBIG`) that names it, before any byte is written.

Example:

>>> save_checkpoint(model, "run/checkpoints", step=1000, epoch=1)
'run/checkpoints/ckpt-0000001000.weights.h5'
>>> restore_checkpoint(model, latest_checkpoint("run/checkpoints"))
"""

import dataclasses
import errno
import hashlib
import json
import os
import re
import time
import warnings

import numpy as np

from keras_transformer.atomic_files import atomic_write, check_room, replacing

_NAME = re.compile(r"^ckpt-(\d{10})\.json$")


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A checkpoint on disk: `step`, `weights_path`, `metadata_path`, and
    `read`, its metadata once read (by `latest_checkpoint`), or None."""

    step: int
    weights_path: str
    metadata_path: str
    read: dict = dataclasses.field(default=None, compare=False, repr=False)

    def metadata(self):
        """The metadata read with the checkpoint, else read from its file now."""
        if self.read is not None:
            return self.read
        with open(self.metadata_path, encoding="utf-8") as f:
            return json.load(f)


def _paths(directory, step):
    stem = os.path.join(directory, f"ckpt-{step:010d}")
    return stem + ".weights.h5", stem + ".json"


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def rng_variables(model):
    """The dropout seed-generator states, which `save_weights` leaves out."""
    return [v for v in model.variables if "seed_generator_state" in v.path]


def _build_optimizer(model):
    """Creates the optimizer's variables (Keras makes them at the first
    step), so that a checkpoint holds them however early it is written."""
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)


def _bytes_needed(model, directory):
    """What a checkpoint of `model` takes on disk: the newest one's size in
    `directory`, or the bytes of its variables and a margin for HDF5's own."""
    newest = list_checkpoints(directory)[-1:]
    if newest and os.path.exists(newest[0].weights_path):
        return os.path.getsize(newest[0].weights_path)
    return variables_bytes([*model.weights, *(model.optimizer.variables if model.optimizer else [])])


def variables_bytes(variables):
    """About what `variables` take in a `.weights.h5` file: their bytes,
    and a tenth more and a MiB for HDF5's own."""
    total = 0
    for variable in variables:
        bits = re.search(r"\d+", str(variable.dtype))  # float32, bfloat16, int8, float8_e4m3fn; bool: none
        total += int(np.prod(variable.shape)) * (int(bits.group()) // 8 if bits else 1)
    return int(1.1 * total) + (1 << 20)


def save_checkpoint(model, directory, step, epoch, extra=None):
    """Writes checkpoint `step` of `model` (and its optimizer) atomically.

    Returns the weights path. `extra` (a JSON-able dict) is stored in the
    metadata. A checkpoint that does not fit on the disk is an `OSError`,
    and nothing is written (`check_room`).
    """
    os.makedirs(directory, exist_ok=True)
    _build_optimizer(model)
    weights_path, metadata_path = _paths(directory, step)
    check_room(directory, _bytes_needed(model, directory), f"checkpoint {weights_path}")
    with replacing(weights_path, suffix=".weights.h5") as temporary:
        model.save_weights(temporary, overwrite=True)
    metadata = {
        "step": int(step),
        "epoch": int(epoch),
        "size": os.path.getsize(weights_path),
        "sha256": file_sha256(weights_path),
        "rng": [
            {"path": v.path, "value": np.asarray(v.numpy()).tolist()} for v in rng_variables(model)
        ],
        "time": time.time(),
        **(extra or {}),
    }
    atomic_write(metadata_path, json.dumps(metadata, indent=1))
    return weights_path


def list_checkpoints(directory):
    """Complete-looking checkpoints in `directory`, oldest first (unverified)."""
    if not os.path.isdir(directory):
        return []
    found = []
    for name in os.listdir(directory):
        match = _NAME.match(name)
        if match:
            step = int(match.group(1))
            found.append(Checkpoint(step, *_paths(directory, step)))
    return sorted(found, key=lambda c: c.step)


def verify_checkpoint(checkpoint):
    """`None` if `checkpoint` is intact, else the reason it is not."""
    return _read(checkpoint)[1]


def _read(checkpoint):
    """`(metadata, None)` for an intact `checkpoint`, else `(None, reason)`."""
    try:
        metadata = checkpoint.metadata()
    except (OSError, ValueError) as error:
        return None, f"unreadable metadata ({error})"
    if not isinstance(metadata, dict):
        return None, "unreadable metadata (not a JSON object)"
    if not os.path.exists(checkpoint.weights_path):
        return None, "weights file missing"
    if os.path.getsize(checkpoint.weights_path) != metadata.get("size"):
        return None, "weights file has the wrong size (partial or overwritten)"
    if file_sha256(checkpoint.weights_path) != metadata.get("sha256"):
        return None, "weights file does not match its SHA-256 (corrupt)"
    try:
        import h5py

        with h5py.File(checkpoint.weights_path, "r"):
            pass
    except OSError as error:
        return None, f"weights file does not open ({error})"
    return metadata, None


def latest_checkpoint(directory, log=None):
    """The newest intact checkpoint, with its metadata read, or `None`.

    Each damaged newer checkpoint is skipped with a warning (and `log`
    message) naming it and the reason.
    """
    for checkpoint in reversed(list_checkpoints(directory)):
        metadata, reason = _read(checkpoint)
        if reason is None:
            return dataclasses.replace(checkpoint, read=metadata)
        message = (
            f"Checkpoint {checkpoint.weights_path} of step {checkpoint.step} is unusable: "
            f"{reason}. Falling back to the previous checkpoint."
        )
        warnings.warn(message, stacklevel=2)
        if log is not None:
            log(message)
    return None


def restore_checkpoint(model, checkpoint):
    """Loads weights, optimizer state and dropout RNG states from
    `checkpoint`; returns its metadata."""
    metadata = checkpoint.metadata()
    _build_optimizer(model)
    model.load_weights(checkpoint.weights_path)
    saved = metadata.get("rng", [])
    variables = rng_variables(model)
    if len(saved) == len(variables):
        for variable, state in zip(variables, saved):
            variable.assign(np.asarray(state["value"], dtype=variable.dtype))
    else:
        warnings.warn(
            f"Checkpoint {checkpoint.weights_path} holds {len(saved)} RNG states for "
            f"{len(variables)} in the model; dropout masks will differ from the original run.",
            stacklevel=2,
        )
    return metadata


def prune_checkpoints(directory, keep):
    """Deletes all but the newest `keep` checkpoints and stale temporary files."""
    checkpoints = list_checkpoints(directory)
    for checkpoint in checkpoints[: max(0, len(checkpoints) - keep)]:
        for path in (checkpoint.metadata_path, checkpoint.weights_path):
            if os.path.exists(path):
                os.remove(path)
    for name in os.listdir(directory):
        if name.startswith(".tmp-"):
            os.remove(os.path.join(directory, name))
