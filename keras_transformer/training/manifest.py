"""The run manifest: which training run an output directory belongs to.

`run.json` in the output directory records what makes a run the same run
(model config, optimizer recipe, batching, checkpoint interval, seed, and
the data, e.g. the corpus and the vocabulary size asked for).
Starting `train` on a directory that holds another run's manifest, or
checkpoints or a model without a manifest, is an error unless
`overwrite=True`, which deletes that run's files first (`RUN_FILES`: its
manifest, checkpoints, logs, tokenizer and model), so that nothing of it
stays beside the new run's files. The same run resumes.

One process at a time trains in a directory: `holding_output_dir` holds
its lock file, `train.lock`, which names the process. A second run there
is refused (`LockedError`) while the first runs; one killed leaves nothing
held.

Example:

>>> claim_output_dir("runs/base", {"model": {...}, "seed": 0})
'new'
>>> claim_output_dir("runs/base", {"model": {...}, "seed": 0})
'resume'
"""

import json
import os
import shutil
import tempfile

from keras_transformer import locks
from keras_transformer.atomic_files import atomic_write
from keras_transformer.models.presets import CONFIG_FILE, METADATA_FILE, TOKENIZER_FILE, WEIGHTS_FILE
from keras_transformer.translation.loading import MANIFEST, read_manifest

CHECKPOINTS = "checkpoints"
LOCK = "train.lock"
# What a run writes in its directory, the manifest first: its checkpoints,
# TensorBoard logs, and the files of the preset that it ends as.
RUN_FILES = (MANIFEST, CHECKPOINTS, "logs", TOKENIZER_FILE, CONFIG_FILE, WEIGHTS_FILE, METADATA_FILE)
# A model in a directory without a manifest: another run's, or a preset.
MODEL_FILES = (CONFIG_FILE, WEIGHTS_FILE)


class RunMismatchError(ValueError):
    """The output directory belongs to a different training run."""


def _normalise(identity):
    return json.loads(json.dumps(identity, sort_keys=True, default=str))


def _differences(old, new, prefix=""):
    """Dotted names of the keys whose values differ, e.g. `["data.corpus", "seed"]`."""
    keys = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            keys += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            keys.append(prefix + key)
    return keys


def _check_writable(directory):
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        raise OSError(f"Output directory {directory!r} is not writable: {error}") from None


def _check_directory(output_dir):
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise NotADirectoryError(f"Output directory {output_dir!r} is not a directory.")


def check_output_dir(output_dir, identity, overwrite=False, partial=False):
    """`"new"` or `"resume"` for a run of `identity` in `output_dir`, writing nothing.

    Raises `RunMismatchError` for another run's directory (unless
    `overwrite`). With `partial`, only the keys of `identity` are compared:
    a check made before the rest of the run is known.
    """
    output_dir = os.fspath(output_dir)
    _check_directory(output_dir)
    identity = _normalise(identity)
    try:
        existing = read_manifest(output_dir)
        reason = None
    except ValueError as error:
        existing, reason = {}, str(error)
    stored = dict((existing or {}).get("identity", {}))
    if existing and "data" in identity and "data" not in stored:  # from before the data was recorded
        stored["data"] = identity["data"]
    if partial:
        stored = {k: stored.get(k) for k in identity}
    checkpoint_dir = os.path.join(output_dir, CHECKPOINTS)
    has_checkpoints = os.path.isdir(checkpoint_dir) and bool(os.listdir(checkpoint_dir))
    model = [name for name in MODEL_FILES if os.path.exists(os.path.join(output_dir, name))]
    if existing and stored == identity:
        return "resume"
    if (existing is not None or has_checkpoints or model) and not overwrite:
        if reason is None and existing is None:
            held = "checkpoints" if has_checkpoints else f"a model ({', '.join(model)})"
            reason = f"it holds {held} but no run manifest"
        elif reason is None:
            reason = f"it belongs to another run (different {', '.join(_differences(stored, identity))})"
        raise RunMismatchError(
            f"Output directory {output_dir!r} cannot be used: {reason}. Use a new directory, "
            "resume with the same settings, or pass overwrite=True to delete "
            "that run's files."
        )
    return "new"


def claim_output_dir(output_dir, identity, overwrite=False, write=True, write_run_files=None):
    """Checks `output_dir` against `identity`; returns `"new"` or `"resume"`.

    A new run removes the files of a run there (`RUN_FILES`, the manifest
    first), calls `write_run_files`, then writes its manifest: a manifest
    stands only beside its own run's files, even after a crash in between,
    and no other run's model stands beside them.

    Args:
        output_dir: str. The run's output directory.
        identity: JSON-able dict that defines the run.
        overwrite: bool. Replace another run's manifest and checkpoints.
        write: bool. Write the manifest (only the chief worker writes).
        write_run_files: optional callable `(output_dir)`, for a new run
            only: writes the files that a resumed run reads back (e.g. its
            tokenizer).
    """
    status = check_output_dir(output_dir, identity, overwrite)
    checkpoint_dir = os.path.join(output_dir, CHECKPOINTS)
    if write and status == "resume":  # fail now, not after a checkpoint interval of training
        for directory in (output_dir, checkpoint_dir):
            if os.path.isdir(directory):
                _check_writable(directory)
    elif write:
        for name in RUN_FILES:
            path = os.path.join(output_dir, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)
        os.makedirs(output_dir, exist_ok=True)
        if write_run_files is not None:
            write_run_files(output_dir)
        atomic_write(
            os.path.join(output_dir, MANIFEST),
            json.dumps({"identity": _normalise(identity)}, indent=1, sort_keys=True),
        )
    return status


def holding_output_dir(output_dir):
    """A context that holds `output_dir`'s lock (`locks.holding`) for one run.

    Raises:
        locks.LockedError: another process trains there; it names it.
    """
    output_dir = os.fspath(output_dir)
    _check_directory(output_dir)
    return locks.holding(os.path.join(output_dir, LOCK), f"Output directory {output_dir!r}")
