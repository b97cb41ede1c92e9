"""Writing a benchmark's JSON report."""

import json
import os


def write_json(path, payload):
    """Writes `payload` as indented JSON to `path`, creating its folder."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
