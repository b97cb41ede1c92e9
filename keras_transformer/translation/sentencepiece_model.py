"""A SentencePiece model file's pieces and special ids, read and written.

A SentencePiece model is a serialized `ModelProto` (SentencePiece's
`sentencepiece_model.proto`): its pieces (field 1), each a string, a score
and a type, then its trainer, normalizer and denormalizer specs. The
tokenizer reads its `trainer_spec.vocab_size` (`model_vocab_size`), and an
import (`keras_transformer.translation.marian`) rewrites a model's pieces and
special ids (`rewrite`). Both work on protobuf's wire format directly:
SentencePiece's generated protobuf module demands a protobuf runtime at
least as new as the one that generated it, which the TensorFlow releases
this package allows do not all have. The other fields are kept as they are.

Example:

>>> pieces = read_pieces(proto)                       # [Piece("<unk>", 0.0, UNKNOWN), ...]
>>> proto = rewrite(proto, pieces, vocab_size=len(pieces), special={"pad_id": 0, ...})
"""

import struct
from typing import NamedTuple

# `ModelProto.SentencePiece.Type`.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

_PIECES, _TRAINER_SPEC = 1, 2  # ModelProto's fields
_PIECE, _SCORE, _TYPE = 1, 2, 3  # SentencePiece's
_MODEL_TYPE, _VOCAB_SIZE = 3, 4  # TrainerSpec's
UNIGRAM, BPE = 1, 2  # TrainerSpec.ModelType
# TrainerSpec's special ids and pieces, by name.
SPECIAL_FIELDS = {"unk_id": 40, "bos_id": 41, "eos_id": 42, "pad_id": 43, "unk_surface": 44, "unk_piece": 45,
                  "bos_piece": 46, "eos_piece": 47, "pad_piece": 48}
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


class Piece(NamedTuple):
    piece: str
    score: float
    type: int


def _varint(data, position):
    """`(value, position after it)` of the varint at `position` of `data`."""
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def _encode_varint(value):
    if value < 0:  # int32 and enum fields: two's complement on 64 bits
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fields(data):
    """`[(number, wire type, value, raw bytes)]` of a message's fields, in
    order: a varint's value, a length-delimited field's bytes, a fixed one's
    raw bytes."""
    fields, position = [], 0
    while position < len(data):
        start = position
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, position = _varint(data, position)
        elif wire == _LENGTH:
            size, position = _varint(data, position)
            value, position = data[position : position + size], position + size
        elif wire in (_FIXED32, _FIXED64):
            size = 4 if wire == _FIXED32 else 8
            value, position = data[position : position + size], position + size
        else:
            raise ValueError(f"Not a SentencePiece model: an unknown protobuf wire type {wire} at byte {start}")
        fields.append((number, wire, value, data[start:position]))
    return fields


def _length_field(number, payload):
    return _encode_varint(number << 3 | _LENGTH) + _encode_varint(len(payload)) + payload


def _varint_field(number, value):
    return _encode_varint(number << 3 | _VARINT) + _encode_varint(value)


def read_pieces(proto):
    """The model's pieces in id order, each a `Piece`."""
    pieces = []
    for number, _, value, _ in _fields(proto):
        if number == _PIECES:
            piece, score, kind = "", 0.0, NORMAL
            for field, _, item, _ in _fields(value):
                if field == _PIECE:
                    piece = bytes(item).decode("utf-8")
                elif field == _SCORE:
                    score = struct.unpack("<f", item)[0]
                elif field == _TYPE:
                    kind = item
            pieces.append(Piece(piece, score, kind))
    return pieces


def _trainer_spec(proto):
    specs = [value for number, _, value, _ in _fields(proto) if number == _TRAINER_SPEC]
    return specs[-1] if specs else b""


def _trainer_field(proto, field, default=None):
    values = [value for number, _, value, _ in _fields(_trainer_spec(proto)) if number == field]
    return values[-1] if values else default


def model_vocab_size(proto):
    """The model's `trainer_spec.vocab_size`, or None if it has none."""
    return _trainer_field(proto, _VOCAB_SIZE)


def model_type(proto):
    """The model's `trainer_spec.model_type`: `UNIGRAM` (the default), `BPE`, ..."""
    return _trainer_field(proto, _MODEL_TYPE, UNIGRAM)


def rewrite(proto, pieces, vocab_size, special):
    """`proto` with `pieces` (a list of `Piece`, in id order) instead of its
    own, `trainer_spec.vocab_size` set to `vocab_size` and the special ids
    and pieces of `special` (names of `SPECIAL_FIELDS`: ints for ids,
    strings for pieces) set; the rest as it was."""
    unknown = sorted(set(special) - set(SPECIAL_FIELDS))
    if unknown:
        raise ValueError(f"Unknown special fields {unknown}. Expected some of {sorted(SPECIAL_FIELDS)}")
    replaced = {_VOCAB_SIZE, *(SPECIAL_FIELDS[name] for name in special)}
    spec = b"".join(raw for number, _, _, raw in _fields(_trainer_spec(proto)) if number not in replaced)
    spec += _varint_field(_VOCAB_SIZE, vocab_size)
    for name, value in special.items():
        number = SPECIAL_FIELDS[name]
        spec += _length_field(number, value.encode("utf-8")) if isinstance(value, str) else _varint_field(number, value)
    out = b"".join(
        _length_field(_PIECES, _length_field(_PIECE, p.piece.encode("utf-8"))
                      + _encode_varint(_SCORE << 3 | _FIXED32) + struct.pack("<f", p.score)
                      + _varint_field(_TYPE, p.type))
        for p in pieces
    )
    out += _length_field(_TRAINER_SPEC, spec)
    out += b"".join(raw for number, _, _, raw in _fields(proto) if number not in (_PIECES, _TRAINER_SPEC))
    return out
