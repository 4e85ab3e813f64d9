"""Documentation completeness is a test: every public module, class and function of ringtree
has a docstring."""

import importlib
import inspect
import pkgutil

import ringtree

OPTIONAL = ("mpi4py",)  # modules whose import needs an optional dependency


def public_modules():
    for info in pkgutil.walk_packages(ringtree.__path__, "ringtree."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        try:
            yield importlib.import_module(info.name)
        except ImportError as e:
            if e.name not in OPTIONAL:
                raise


def test_every_public_object_has_a_docstring():
    missing = []
    for mod in public_modules():
        if not inspect.getdoc(mod):
            missing.append(mod.__name__)
        for name, obj in vars(mod).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and not inspect.getdoc(obj):
                missing.append(f"{mod.__name__}.{name}")
    assert not missing, f"public objects without a docstring: {missing}"
