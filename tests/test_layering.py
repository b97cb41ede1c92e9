"""The package's modules import one another without a circle."""

import ast
import os

PACKAGE = "keras_transformer"
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), PACKAGE)


def module_files():
    """`{module name: path}` of every module of the package."""
    modules = {}
    for directory, _, files in os.walk(ROOT):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                parts = os.path.relpath(path, os.path.dirname(ROOT))[:-3].split(os.sep)
                modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_modules(path, name, modules):
    """The package's modules that `path` imports anywhere in it (function
    bodies included), each with the packages that importing it runs first
    but `name`'s own packages, which Python has imported before `name`."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for imported in names:
            parts = imported.split(".")
            targets.update(".".join(parts[:i]) for i in range(2, len(parts) + 1) if ".".join(parts[:i]) in modules)
    return {target for target in targets if not (name + ".").startswith(target + ".")}


def find_circle(graph):
    """One import circle of `graph` as a list of modules, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                circle = visit(target, path + [target])
                if circle:
                    return circle
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            circle = visit(node, [node])
            if circle:
                return circle
    return None


def test_no_module_imports_itself_through_others():
    modules = module_files()
    # The top package's `__init__` only gathers the public names of the others.
    graph = {name: imported_modules(path, name, modules) - {PACKAGE} for name, path in modules.items() if name != PACKAGE}
    assert find_circle(graph) is None, " -> ".join(find_circle(graph))


def test_a_circle_is_found():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) is None


def root_imports(path, modules):
    """The lines of `path` that import a name of the package root itself,
    not one of its modules, anywhere in it (function bodies included)."""
    lines = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import) and any(alias.name == PACKAGE for alias in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == PACKAGE and not node.level and any(
                f"{PACKAGE}.{alias.name}" not in modules for alias in node.names):
            lines.append(node.lineno)
    return lines


def test_no_module_imports_the_package_root():
    # The root imports the public modules, so a module that imports a name of
    # the root, even inside a function, closes a circle through it.
    modules = module_files()
    found = [f"{name}:{line}" for name, path in modules.items() if name != PACKAGE for line in root_imports(path, modules)]
    assert found == []
