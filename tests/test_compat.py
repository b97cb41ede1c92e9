"""The package reaches past the public APIs of Keras, TensorFlow, JAX and
PyTorch, or writes its own gradient, only in `keras_transformer/compat/`,
whose modules name each reason."""

import ast
import os

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "keras_transformer")
COMPAT = os.path.join(ROOT, "compat")
# Documented API despite the underscore: namedtuple's methods and fields.
PUBLIC_UNDERSCORED = {"_replace", "_fields", "_asdict", "_make"}
PRIVATE_MODULES = ("keras.src", "tensorflow.python", "tensorflow.core", "jax._src", "torch._")


def package_trees():
    for directory, _, files in os.walk(ROOT):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as f:
                    yield path, ast.parse(f.read(), path)


def own_names(trees):
    """Underscored names the package defines itself: functions, classes,
    attributes it assigns, arguments."""
    names = set()
    for _, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return names


def private_uses(path, tree, own):
    """`line: what` for each private attribute of another library, and each
    import of a library's private module, in `tree`."""
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name = node.attr
            if name.startswith("_") and not name.startswith("__") and name not in own | PUBLIC_UNDERSCORED:
                uses.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}: .{name}")
            if name == "custom_gradient":
                uses.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}: a custom gradient")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            uses += [f"{os.path.relpath(path, ROOT)}:{node.lineno}: import {module}"
                     for module in modules if module.startswith(PRIVATE_MODULES)]
    return uses


def test_private_library_apis_are_used_only_in_the_compat_module():
    trees = list(package_trees())
    compat = [(path, tree) for path, tree in trees if os.path.dirname(path) == COMPAT]
    rest = [(path, tree) for path, tree in trees if os.path.dirname(path) != COMPAT]
    own = own_names(rest)
    outside = [use for path, tree in rest for use in private_uses(path, tree, own)]
    assert not outside, "\n".join(outside)
    # The check sees them where they are: compat/ has each it documents.
    inside = " ".join(use for path, tree in compat for use in private_uses(path, tree, own))
    for name in ("._flatten_layers", "._set_attr", "._maybe_symbolic_build", "._symbolic_build",
                 "import tensorflow.core", "a custom gradient"):
        assert name in inside, (name, inside)
