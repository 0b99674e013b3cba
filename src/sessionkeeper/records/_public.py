"""
The public path of re-exported classes and functions (issue 12): ``__module__`` names the public module.

:func:`set_public_module` runs at the end of a public module (a package ``__init__``, ``hooks``): each class
and function in its ``__all__`` that still names a private module (``sessionkeeper.transcript._manager``)
gets the public one (``sessionkeeper.transcript``), as anyio does for its re-exports, so reprs, docs and
pickles show the path a user imports. A module claims only its own package's objects (or the private
modules it names), so a re-export keeps its home's path.

Typing, msgspec and cattrs keep working: with ``from __future__ import annotations``, class annotations are
strings that :func:`typing.get_type_hints`, msgspec and cattrs evaluate in the module ``__module__`` names.
A class whose own string annotations use only names meaning the same object in the public module (or
builtins) just moves (checking names costs a regular expression). Any other class moves with its own
annotations evaluated where it was written (``Literal``, private aliases and all), so nothing is
evaluated in the public module later; a class with an annotation that does not evaluate there (a name
imported only under ``TYPE_CHECKING``) keeps its defining module. Functions evaluate theirs in their own
``__globals__`` and always move.
"""

from __future__ import annotations

import builtins
import inspect
import re
import sys
from collections.abc import Mapping


__all__ = ("set_public_module",)

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


def _annotations_resolve_in(cls: type, public: Mapping[str, object]) -> bool:
    """Whether the class's own string annotations mean the same in ``public`` as where it was defined."""
    annotations = inspect.get_annotations(cls)  # its own, unevaluated
    texts = [value for value in annotations.values() if isinstance(value, str)]
    if not texts:
        return True
    home = vars(sys.modules[cls.__module__])
    for text in texts:
        for name in _NAME.findall(_QUOTED.sub("", text)):
            if name in public:
                if name in home and home[name] is not public[name]:
                    return False
            elif not hasattr(builtins, name) or name in home:
                return False
    return True


def _evaluated_annotations(cls: type) -> dict[str, object] | None:
    """The class's own annotations evaluated in its defining module; ``None`` when one does not evaluate."""
    home = dict(vars(sys.modules[cls.__module__]))
    scope = dict(vars(cls))
    evaluated: dict[str, object] = {}
    for name, value in inspect.get_annotations(cls).items():
        if isinstance(value, str):
            try:
                value = eval(value, home, scope)  # the annotation text of our own class
            except Exception:  # any failure: the class keeps its defining module
                return None
        evaluated[name] = value
    return evaluated


def _move_class(cls: type, public: str, namespace: Mapping[str, object]) -> None:
    if _annotations_resolve_in(cls, namespace):
        cls.__module__ = public
        return
    evaluated = _evaluated_annotations(cls)
    if evaluated is not None:
        cls.__annotations__ = evaluated
        cls.__module__ = public


def set_public_module(
    namespace: Mapping[str, object], *, sources: tuple[str, ...] = (), also: tuple[str, ...] = ()
) -> None:
    """
    Give each class and function of ``namespace["__all__"]`` defined in a private module the public path.

    Args:
        namespace: The public module's ``globals()``; its ``__name__`` becomes the ``__module__``.
        sources: The private modules whose objects this module claims; default: its own package's
            private modules at any depth (``sessionkeeper.transcript._manager``,
            ``sessionkeeper.transcript.file._storage`` for ``sessionkeeper.transcript``), so a re-export
            from another package (the records in ``sessionkeeper.transcript``) keeps its home.
        also: Further modules whose objects this module claims besides the default (a core module whose
            public names only this package exports: ``sessionkeeper._lockfile`` for the transcript).
    """
    public = str(namespace["__name__"])
    prefixes = tuple(f"{source}." for source in sources)
    extra = tuple(f"{source}." for source in also)

    def claims(module: str) -> bool:
        if prefixes:
            return f"{module}.".startswith(prefixes)
        if extra and f"{module}.".startswith(extra):
            return True
        inner = module.removeprefix(f"{public}.")  # its own package's private modules, at any depth
        return inner != module and any(part.startswith("_") for part in inner.split("."))

    names = namespace["__all__"]
    if not isinstance(names, tuple):
        raise TypeError(f"{public}.__all__ must be a tuple")
    for name in names:
        obj = namespace[name]
        if isinstance(obj, type):
            if claims(obj.__module__):
                _move_class(obj, public, namespace)
        elif callable(obj) and hasattr(obj, "__code__") and claims(getattr(obj, "__module__", "") or ""):
            obj.__module__ = public
