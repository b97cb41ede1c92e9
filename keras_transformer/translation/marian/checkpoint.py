"""What a reader of a Marian model gives (`Checkpoint`), and what the two
readers (`huggingface`, `native`) share: their files, the error for a
model that cannot be imported exactly, the license files to copy."""

import os
import re
from typing import NamedTuple

LICENSE_FILES = re.compile(r"^(LICEN[SC]E|COPYING|NOTICE)(\..*)?$", re.IGNORECASE)


class Checkpoint(NamedTuple):
    """A source model as read: its config fields, vocabularies, weights in
    the source's id order, and what the model card says about it."""

    config: dict  # `TransformerConfig` fields, but the vocabulary sizes and suppressed ids
    source_pieces: list  # the source vocabulary, in the source's id order
    target_pieces: list  # the target's (the same list for one shared vocabulary)
    special: tuple  # per side, source and target: the ids of "eos", "unk" and "pad" (None: Marian's, none)
    tables: dict  # "embedding", "target_embedding", "output_embedding" (V, d) and "output_bias" (V,) or None
    layers: dict  # "encoder", "decoder": lists of {name: array}, and "encoder_norm", "decoder_norm" or None
    spm: tuple  # the source and target SentencePiece models' bytes
    info: dict  # for the model card and the preset's metadata


def required_file(folder, name):
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"The Marian model at {folder!r} has no {name}. Received: source={folder!r}")
    return path


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def refuse(field, value, why, where):
    """The error for a source the Transformer here cannot reproduce."""
    return ValueError(f"Cannot import this Marian model: {why}. Received: {field}={value!r} in {where}")


def license_of(folder):
    """`{"name": license named by the model card or None, "files": license files}`."""
    files = sorted(f for f in os.listdir(folder) if LICENSE_FILES.match(f))
    name = None
    card = os.path.join(folder, "README.md")
    if os.path.isfile(card):
        with open(card, encoding="utf-8", errors="replace") as f:
            text = f.read()
        front = re.match(r"---\n(.*?)\n---", text, re.S)
        found = re.search(r"^license:\s*(\S.*)$", front.group(1) if front else text, re.M | re.I)
        name = found.group(1).strip().strip("'\"") if found else None
    return {"name": name, "files": files}
