"""The run manifest: which training run an output directory belongs to.

`run.json` in the output directory records what makes a run the same run
(model config, optimizer recipe, batching, checkpoint interval, seed).
Starting `train` on a directory that holds another run's manifest, or
checkpoints without a manifest, is an error unless `overwrite=True`, which
deletes that run's checkpoints first. The same run resumes.

Example:

>>> claim_output_dir("runs/base", {"model": {...}, "seed": 0})
'new'
>>> claim_output_dir("runs/base", {"model": {...}, "seed": 0})
'resume'
"""

import json
import os
import shutil

from keras_transformer.training.checkpoints import atomic_write_text

MANIFEST = "run.json"
CHECKPOINTS = "checkpoints"


class RunMismatchError(ValueError):
    """The output directory belongs to a different training run."""


def _normalise(identity):
    return json.loads(json.dumps(identity, sort_keys=True, default=str))


def read_manifest(output_dir):
    path = os.path.join(output_dir, MANIFEST)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def claim_output_dir(output_dir, identity, overwrite=False, write=True):
    """Checks `output_dir` against `identity`; returns `"new"` or `"resume"`.

    Args:
        output_dir: str. The run's output directory.
        identity: JSON-able dict that defines the run.
        overwrite: bool. Replace another run's manifest and checkpoints.
        write: bool. Write the manifest (only the chief worker writes).
    """
    identity = _normalise(identity)
    existing = read_manifest(output_dir)
    checkpoint_dir = os.path.join(output_dir, CHECKPOINTS)
    has_checkpoints = os.path.isdir(checkpoint_dir) and bool(os.listdir(checkpoint_dir))
    if existing is not None and existing.get("identity") == identity:
        return "resume"
    if (existing is not None or has_checkpoints) and not overwrite:
        if existing is None:
            reason = "it holds checkpoints but no run manifest"
        else:
            keys = sorted(
                k for k in set(existing.get("identity", {})) | set(identity)
                if existing.get("identity", {}).get(k) != identity.get(k)
            )
            reason = f"it belongs to another run (different {', '.join(keys)})"
        raise RunMismatchError(
            f"Output directory {output_dir!r} cannot be used: {reason}. Use a new directory, "
            "resume with the same settings, or pass overwrite=True (--overwrite) to delete "
            "that run's checkpoints."
        )
    if write:
        if has_checkpoints:
            shutil.rmtree(checkpoint_dir)
        os.makedirs(output_dir, exist_ok=True)
        atomic_write_text(
            os.path.join(output_dir, MANIFEST),
            json.dumps({"identity": identity}, indent=1, sort_keys=True),
        )
    return "new"
