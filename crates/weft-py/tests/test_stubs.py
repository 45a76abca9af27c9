"""weft.pyi names what the module has, no more and no less, and every
public class and method has a docstring."""

import ast
import os

import weft

STUB = os.path.join(os.path.dirname(__file__), "..", "weft.pyi")


def _stub():
    tree = ast.parse(open(STUB, encoding="utf-8").read())
    names, methods = set(), {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            methods[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
    return names, methods


def test_module_names_match():
    names, _ = _stub()
    # maturin installs the extension as `weft/weft.abi3.so` under a package
    # that re-exports it: the submodule itself is not API.
    runtime = {n for n in dir(weft) if not n.startswith("_")} - {"weft"} | {"__version__"}
    assert runtime == names


def test_methods_match():
    _, methods = _stub()
    for cls, stub_methods in methods.items():
        runtime = getattr(weft, cls)
        if issubclass(runtime, BaseException):
            continue
        own = {n for n in vars(runtime) if not n.startswith("__") or n in stub_methods}
        if runtime.__base__ is not object:
            own -= set(vars(runtime.__base__))
        own -= {"__new__", "__doc__", "__module__"}
        assert {m for m in stub_methods if m != "__init__"} == own - {"__init__"}, cls


def test_docstrings():
    assert weft.__doc__ and weft.open.__doc__
    for name in dir(weft):
        obj = getattr(weft, name)
        if isinstance(obj, type):
            assert obj.__doc__, name
            for m, f in vars(obj).items():
                if not m.startswith("_") and callable(f):
                    assert f.__doc__, f"{name}.{m}"
