"""The SavedModel: where its writer and readers reach past TensorFlow's public API.

- `saved_model_signature_defs(path)`: TensorFlow has no public reader of a
  SavedModel's `SignatureDef` protos (`tf.saved_model.load` gives its
  signatures as functions, without the tensor names TF Serving's model
  metadata shows); `saved_model.pb` is read with the format's own proto
  module, as `saved_model_cli` reads it (no upstream issue filed).
- `keep_cond_functional(output)`: TensorFlow has no public switch to keep a
  `tf.cond` a functional `If` in a `tf.function` (no upstream issue filed).
"""

import os


def saved_model_signature_defs(path):
    """`{name: SignatureDef}` of the serving graph (tag `serve`) of the
    SavedModel in the folder `path`, read from its `saved_model.pb`."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    graph = next(g for g in saved.meta_graphs if "serve" in g.meta_info_def.tags)
    return dict(graph.signature_def)

def keep_cond_functional(output):
    """Marks the `tf.cond` that computes `output` to stay a functional `If`.

    TensorFlow lowers every `tf.cond` of a function into the function's own
    graph (Switch/Merge), so the first call of a SavedModel optimizes every
    branch, whether the call needs it or not. Unlowered, a branch is a
    function of its own, optimized the first time it runs.
    `_lower_using_switch_merge` is the attribute TensorFlow's cond_v2 sets
    itself, through the private `Operation._set_attr`; stock TensorFlow
    runs either form.
    """
    from tensorflow.core.framework import attr_value_pb2

    op = output.op
    while op.type not in ("If", "StatelessIf"):
        op = op.inputs[0].op
    op._set_attr("_lower_using_switch_merge", attr_value_pb2.AttrValue(b=False))
