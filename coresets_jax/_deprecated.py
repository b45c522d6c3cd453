"""The paths of modules that moved into the subpackages of the pipeline's stages, kept for one release.

`coresets_jax.sharding`, `.streaming`, `.distributed` and `.io` are documented names (`cj.sharding`, ...): they
stay as aliases of their new modules, with no warning (`ALIASES`). The undocumented old paths (`MOVED`) still
resolve to the very same modules, with a DeprecationWarning that names the new path: `import
coresets_jax.pihat` and `from coresets_jax.pihat import laplace` through `MovedFinder`, and the attribute
`cj.pihat` through the package's `__getattr__` (`attribute`). Nothing in the package uses the old paths.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

PACKAGE = "coresets_jax"

# Documented modules that moved: the same module under both names, no warning.
ALIASES = {
    "distributed": "scale.distributed",
    "io": "interop.io",
    "sharding": "scale.sharding",
    "streaming": "scale.streaming",
}

# Old path -> new path (under `coresets_jax.`), deprecated: to be removed in the next release.
MOVED = {
    "arviz_export": "interop.arviz_export",
    "chunks": "core.chunks",
    "compress": "features.compress",
    "laplace_mode": "weighting.laplace_mode",
    "numpyro_bridge": "interop.numpyro_bridge",
    "pihat": "weighting.pihat",
    "projection": "features.projection",
    "stream_checkpoint": "scale.stream_checkpoint",
}


def _moved(old: str, stacklevel: int) -> types.ModuleType:
    """The module now at `MOVED[old]`, after a DeprecationWarning pointed at the caller's line."""
    warnings.warn(f"{PACKAGE}.{old} is deprecated and will be removed in the next release; use "
                  f"{PACKAGE}.{MOVED[old]}", DeprecationWarning, stacklevel=stacklevel + 1)
    return importlib.import_module(f"{PACKAGE}.{MOVED[old]}")


def attribute(name: str) -> types.ModuleType:
    """`cj.<old name>` (the package's `__getattr__`): the moved module, with a warning; else AttributeError."""
    if name not in MOVED:
        raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}")
    return _moved(name, stacklevel=3)  # past this function and the package's __getattr__


class _Loader(importlib.abc.Loader):
    def __init__(self, old: str):
        self.old = old

    def create_module(self, spec):
        return None  # a blank module, replaced in exec_module

    def exec_module(self, module: types.ModuleType) -> None:
        # The import system returns whatever sys.modules holds under the name after exec_module, so the old
        # name becomes an alias of the new module, not a second copy of it. Frames of importlib's bootstrap
        # are skipped by `warnings`, so stacklevel 2 past this method is the line that imports.
        sys.modules[module.__name__] = _moved(self.old, stacklevel=2)


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of `MOVED` (nothing else), as aliases of their new modules."""

    def find_spec(self, fullname: str, path=None, target=None):
        package, _, old = fullname.rpartition(".")
        if package != PACKAGE or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _Loader(old))


class _Package(types.ModuleType):
    """The package's module type. The import system binds every submodule it imports as an attribute of its
    package; for an old path that binding would let `cj.pihat` bypass `__getattr__` (and its warning) from
    then on, and `import coresets_jax.compress` would replace the function `cj.compress` with the module."""

    def __setattr__(self, name: str, value) -> None:
        if name in MOVED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


def install() -> None:
    """Called once by the package's `__init__`, after every subpackage is imported."""
    for old, new in ALIASES.items():
        sys.modules[f"{PACKAGE}.{old}"] = sys.modules[f"{PACKAGE}.{new}"]
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        # First: an editable install's finder maps `coresets_jax.<name>` straight to files in its own source
        # folder, which for these names may be another checkout's old modules.
        sys.meta_path.insert(0, MovedFinder())
    sys.modules[PACKAGE].__class__ = _Package
