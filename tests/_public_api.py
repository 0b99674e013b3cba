"""
The public API as text: every public module, every name in its ``__all__``, and each name's signature.

``tests/test_public_api.py`` compares :func:`render` with the checked-in ``tests/data/public_api.txt``; after
a reviewed change of the public surface, regenerate the file with ``python tests/regen_public_api.py`` and
commit it with the change (the diff is the API review).

One line per name, grouped by module: a class with its constructor signature and then its public methods,
properties and class attributes (indented; those inherited from a base in a private module too, since a
user reaches them on the class); a function with its signature; any other value with its type
(and its ``repr`` when short). A name whose object is exported by an earlier public module is written as
an alias of that home (``= sessionkeeper.records.UserMessage``), so each definition appears once. New
public modules join by themselves (:func:`public_modules`).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path


# Home order: a re-export is written as an alias of the first module (in this order) listing the object.
_RANK = ("exceptions", "records", "hooks", "abc", "transcript", "store", "pruning", "compaction", "runtime")


def public_modules() -> tuple[str, ...]:
    """Every public module (no ``_`` segment, ``__main__`` aside), lower layers first, the facade last."""
    import pkgutil

    import sessionkeeper

    names = [
        info.name
        for info in pkgutil.walk_packages(sessionkeeper.__path__, "sessionkeeper.")
        if not any(part.startswith("_") for part in info.name.split(".")[1:])
    ]

    def rank(name: str) -> tuple[int, str]:
        top = name.split(".")[1]
        return (_RANK.index(top) if top in _RANK else len(_RANK), name)

    return (*sorted(names, key=rank), "sessionkeeper")


SNAPSHOT = Path(__file__).resolve().parent / "data" / "public_api.txt"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SHORT = 100


def _clean(text: str) -> str:
    return _ADDRESS.sub("", text)


def _signature(obj: object) -> str:
    try:
        return _clean(str(inspect.signature(obj)))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"


def _value(obj: object) -> str:
    text = _clean(repr(obj))
    kind = type(obj).__qualname__
    is_type_alias = type(obj).__module__ in {"typing", "types"}
    return f": {kind} = {text}" if is_type_alias or len(text) <= _SHORT else f": {kind}"


def _bases(cls: type) -> str:
    names = [
        b.__qualname__ if b.__module__ == "builtins" else f"{b.__module__}.{b.__qualname__}"
        for b in cls.__bases__
    ]
    names = [n for n in names if n != "object"]
    return f"({', '.join(names)})" if names else ""


def _is_private(module: str) -> bool:
    return module.startswith("sessionkeeper") and any(part.startswith("_") for part in module.split(".")[1:])


def _owners(cls: type) -> list[type]:
    """The class, then its bases from private modules (a user sees their methods on the class itself)."""
    return [cls, *(base for base in cls.__mro__[1:] if _is_private(base.__module__))]


def _members(cls: type) -> Iterator[str]:
    if issubclass(cls, enum.Enum):
        for member in cls:
            yield f"    {member.name} = {_clean(repr(member.value))}"
        return
    own: dict[str, object] = {}
    for owner in reversed(_owners(cls)):  # the class's own members win over what it inherits
        own.update((name, value) for name, value in vars(owner).items() if not name.startswith("_"))
    for name in sorted(own):
        value = own[name]
        if isinstance(value, property):
            yield f"    property {name}"
        elif isinstance(value, (staticmethod, classmethod)):
            yield f"    {type(value).__name__} {name}{_signature(value.__func__)}"
        elif inspect.isfunction(value):
            prefix = "async def" if inspect.iscoroutinefunction(value) else "def"
            yield f"    {prefix} {name}{_signature(value)}"
        elif inspect.isclass(value):
            yield f"    class {name}"
        elif type(value).__name__ in {"member_descriptor", "getset_descriptor", "_CountingAttr"}:
            continue  # a field: the constructor signature shows it
        else:
            yield f"    {name}{_value(value)}"


def _describe(name: str, obj: object) -> Iterator[str]:
    if inspect.isclass(obj):
        yield f"class {name}{_bases(obj)}{_signature(obj)}"
        yield from _members(obj)
    elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
        prefix = "async def" if inspect.iscoroutinefunction(obj) else "def"
        yield f"{prefix} {name}{_signature(obj)}"
    elif inspect.ismodule(obj):
        yield f"module {name} = {obj.__name__}"
    elif name == "__version__":  # computed from git by each build (pyproject): its type, not its value
        yield f"{name}: {type(obj).__qualname__}"
    else:
        yield f"{name}{_value(obj)}"


def render() -> str:
    """The snapshot text (ends with a newline)."""
    lines: list[str] = []
    homes: dict[int, str] = {}
    names = public_modules()
    modules = [importlib.import_module(name) for name in names]  # all first: imports may set __module__
    for module_name, module in zip(names, modules, strict=True):
        lines.append(f"[{module_name}]")
        for name in sorted(module.__all__):
            obj = getattr(module, name)
            home = homes.get(id(obj)) if (inspect.isclass(obj) or inspect.isfunction(obj)) else None
            if home is not None:
                lines.append(f"{name} = {home}.{getattr(obj, '__name__', name)}")
                continue
            if inspect.isclass(obj) or inspect.isfunction(obj):
                homes[id(obj)] = module_name
            lines.extend(_describe(name, obj))
        lines.append("")
    return "\n".join(lines)
