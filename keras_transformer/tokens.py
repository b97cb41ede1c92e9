"""The special tokens and the packing rule, defined once for the package.

Every sequence the model sees is packed here:

    source         = ids + [EOS]
    target         = [BOS] + ids + [EOS]
    decoder input  = target[:-1]  = [BOS] + ids
    labels         = target[1:]   = ids + [EOS]

Batches are filled up with `PAD_ID` (0), which attention masks and the loss
and metrics ignore. An output sequence ends at its first EOS, and PAD and
BOS in it are not text (`unpack_output`). A `max_length` counts the special
tokens: a source holds at most `max_length - 1` ids, a target
`max_length - 2`.

The tokenizer, the tf.data and NumPy pipelines, decoding, the `Translator`,
the SavedModel export and the CLI all pack and unpack with these functions;
the `...ragged` forms are the same rules for TensorFlow ragged tensors
(tf.data and SavedModel graphs).

Example:

>>> pack_source([17, 42])
[17, 42, 3]
>>> split_target(pack_target([17, 42]))
([2, 17, 42], [17, 42, 3])
>>> unpack_output([17, 42, 3, 0, 0])
[17, 42]
"""

PAD_ID = 0  # fills batches; masked in attention, ignored by the loss
UNK_ID = 1  # a piece the vocabulary lacks
BOS_ID = 2  # starts every decoder input
EOS_ID = 3  # ends every source and every target
SPECIAL_IDS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)


def source_capacity(max_length):
    """Ids a source of `max_length` tokens holds besides its EOS."""
    return max_length - 1


def target_capacity(max_length):
    """Ids a target of `max_length` tokens holds besides its BOS and EOS."""
    return max_length - 2


def pack_source(ids):
    """The encoder input of a sentence's ids: `ids + [EOS]`."""
    return [*ids, EOS_ID]


def pack_target(ids):
    """The whole target sequence of a sentence's ids: `[BOS] + ids + [EOS]`."""
    return [BOS_ID, *ids, EOS_ID]


def split_target(target):
    """`(decoder_input, labels)` of packed targets: the sequence less its last
    token, and less its first. Takes a list, or an array or tensor whose last
    axis is the sequence."""
    if isinstance(target, list):
        return target[:-1], target[1:]
    return target[..., :-1], target[..., 1:]


def unpack_output(ids):
    """The token ids of one decoded row, up to its first EOS, without PAD and BOS."""
    out = []
    for token in ids:
        token = int(token)
        if token == EOS_ID:
            break
        if token not in (PAD_ID, BOS_ID):
            out.append(token)
    return out


def pack_source_ragged(ids):
    """`pack_source` for a `tf.RaggedTensor` `(batch, None)` of int32 ids."""
    import tensorflow as tf

    eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, ids.dtype))
    return tf.concat([ids, eos], axis=1)


def pack_target_ragged(ids):
    """`pack_target` for a `tf.RaggedTensor` `(batch, None)` of int32 ids."""
    import tensorflow as tf

    rows = ids.nrows()
    bos = tf.fill([rows, 1], tf.constant(BOS_ID, ids.dtype))
    eos = tf.fill([rows, 1], tf.constant(EOS_ID, ids.dtype))
    return tf.concat([bos, ids, eos], axis=1)


def unpack_output_ragged(ids):
    """`unpack_output` for dense 0-padded or ragged int ids `(batch, length)`:
    a `tf.RaggedTensor` of each row's text ids."""
    import tensorflow as tf

    if isinstance(ids, tf.RaggedTensor):
        ids = ids.to_tensor(default_value=PAD_ID)
    ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)  # (batch, length)
    before_eos = tf.math.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=-1) == 0
    keep = before_eos & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, BOS_ID)
    return tf.ragged.boolean_mask(ids, keep)
