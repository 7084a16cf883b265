"""Names a package exports without importing the module that defines them until one is used
(PEP 562): for modules that import DSPy, which takes seconds (``controller``'s role modules, the
ROMA paper's GEPA tables). Below every room, so any package may use it."""

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(package: str, module: str, names: Iterable[str]) -> Callable[[str], Any]:
    """The module-level ``__getattr__`` of ``package`` that imports ``module`` (relative to
    ``package``) on first access to one of ``names`` and returns that attribute of it."""
    return lazy_exports_from(package, {module: names})


def lazy_exports_from(package: str, modules: Mapping[str, Iterable[str]]) -> Callable[[str], Any]:
    """:func:`lazy_exports` for names defined in several modules (``{module: names}``)."""
    home = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name in home:
            return getattr(importlib.import_module(home[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
