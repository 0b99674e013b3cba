"""
The public surface (issue 12, "The public surface, written once"): each top-level name written once, read
back at run time from the same lines, and the hooks module being the union of its two private modules.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import sessionkeeper
import sessionkeeper.hooks
from sessionkeeper import _hook_events, _hooks


INIT = Path(sessionkeeper.__file__)


def _redundant_alias_imports() -> tuple[dict[str, str], dict[str, str]]:
    """``from m import X as X`` lines of ``sessionkeeper/__init__.py``: (eager, under TYPE_CHECKING)."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    eager: dict[str, str] = {}
    lazy: dict[str, str] = {}

    def collect(nodes: list[ast.stmt], into: dict[str, str]) -> None:
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sessionkeeper"):
                for alias in node.names:
                    if alias.asname == alias.name:
                        into[alias.name] = node.module

    collect(tree.body, eager)
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            collect(node.body, lazy)
    return eager, lazy


def test_the_runtime_table_is_exactly_the_typed_import_lines() -> None:
    eager, lazy = _redundant_alias_imports()
    assert len(lazy) > 100
    exports = sessionkeeper._exports()
    assert {name: module for name, module in exports.items() if module is not None} == lazy
    assert {name for name, module in exports.items() if module is None} == set(eager)
    assert sessionkeeper.__all__ == tuple(sorted({*eager, *lazy}))


def test_every_top_level_name_resolves_to_the_object_of_its_module() -> None:
    import importlib

    _, lazy = _redundant_alias_imports()
    for name, module in lazy.items():
        assert getattr(sessionkeeper, name) is getattr(importlib.import_module(module), name), name
    assert set(sessionkeeper.__all__) <= set(dir(sessionkeeper))


def test_all_and_version_are_lazy_and_load_no_subpackage() -> None:
    code = (
        "import sys, sessionkeeper\n"
        "names = sessionkeeper.__all__\n"
        "version = sessionkeeper.__version__\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('sessionkeeper.') and m not in"
        " ('sessionkeeper.exceptions', 'sessionkeeper._version', 'sessionkeeper._build_version'))\n"
        "assert loaded == [], loaded\n"
        "assert 'importlib.metadata' not in sys.modules\n"
        "assert 'SessionRuntime' in names and '__version__' in names, names\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_star_import_gives_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from sessionkeeper import *", namespace)
    assert set(sessionkeeper.__all__) <= set(namespace)


def test_hooks_is_the_union_of_the_events_and_the_registry_modules() -> None:
    assert sessionkeeper.hooks.__all__ == _hook_events.__all__ + _hooks.__all__
    assert not set(_hook_events.__all__) & set(_hooks.__all__)
    for name in sessionkeeper.hooks.__all__:
        home = _hook_events if name in _hook_events.__all__ else _hooks
        assert getattr(sessionkeeper.hooks, name) is getattr(home, name), name


def test_the_public_api_matches_the_reviewed_snapshot() -> None:
    """Any change of a public name or signature shows up here; regenerate and review the diff."""
    from tests._public_api import SNAPSHOT, render

    current = render()
    expected = SNAPSHOT.read_text(encoding="utf-8")
    if current != expected:
        import difflib

        diff = "\n".join(
            difflib.unified_diff(
                expected.splitlines(), current.splitlines(), "public_api.txt", "current", lineterm=""
            )
        )
        raise AssertionError(
            "the public API changed; if intended, run `.venv/bin/python tests/regen_public_api.py`, "
            f"review and commit tests/data/public_api.txt:\n{diff}"
        )


# Public-looking classes that public signatures use but no public module exports yet, each with its owner
# (issue 12). The test below fails when one of them gets exported (drop it here) or a new one appears.
_KNOWN_UNEXPORTED = {
    "sessionkeeper.adapters._client.SdkModelClient": "base class of the public adapter clients (adapters)",
    "sessionkeeper.store._backend.RowsAlwaysLoad": "base class of the public store backends (store)",
    "sessionkeeper.store._postgres_transcript_reads.PostgresTranscriptReads": (
        "base class of PostgresTranscriptStorage (store)"
    ),
    "sessionkeeper.store._postgres_transcript_archives.PostgresTranscriptArchives": (
        "base class of PostgresTranscriptStorage (store)"
    ),
    "sessionkeeper.transcript.lock._registry.Held": "SessionWriteLock's constructor (transcript)",
    "sessionkeeper.transcript._appends.TranscriptAppends": "base class of TranscriptManager (transcript)",
    "sessionkeeper.transcript._storage_writer.StorageWriter": "TranscriptManager's constructor (transcript)",
    "sessionkeeper.transcript.file._follow.FileMark": "TranscriptManager's constructor (transcript)",
}


def _private_modules() -> list[str]:
    import pkgutil

    names = []
    for info in pkgutil.walk_packages(sessionkeeper.__path__, "sessionkeeper."):
        parts = info.name.split(".")[1:]
        if parts[-1] != "__main__" and any(part.startswith("_") for part in parts):
            names.append(info.name)
    return names


def test_every_public_class_a_public_signature_uses_is_exported() -> None:
    """
    A class without an underscore, defined in a private module and named in a public signature (a
    parameter, a return, a base class), must be exported by a public module: a user must be able to
    import the types the API hands them.
    """
    import importlib
    import inspect
    import re

    from tests._public_api import public_modules, render

    signatures = "\n".join(line.partition("(")[2] for line in render().splitlines())
    used = set(re.findall(r"[A-Za-z_]\w*", signatures))
    exported = {id(getattr(m, n)) for m in map(importlib.import_module, public_modules()) for n in m.__all__}
    unexported = set()
    for module_name in _private_modules():
        for name, obj in vars(importlib.import_module(module_name)).items():
            if name.startswith("_") or not inspect.isclass(obj) or obj.__module__ != module_name:
                continue
            if name in used and id(obj) not in exported:
                unexported.add(f"{module_name}.{name}")
    assert unexported == set(_KNOWN_UNEXPORTED), (
        f"used by the public API but exported nowhere: {sorted(unexported - set(_KNOWN_UNEXPORTED))}; "
        f"exported now (drop from _KNOWN_UNEXPORTED): {sorted(set(_KNOWN_UNEXPORTED) - unexported)}"
    )


def _exported_definitions() -> list[tuple[str, object]]:
    """Every class and function exported by a public module, once, with the module exporting it."""
    import importlib
    import inspect

    from tests._public_api import public_modules

    seen: set[int] = set()
    found: list[tuple[str, object]] = []
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and id(obj) not in seen:
                seen.add(id(obj))
                found.append((module_name, obj))
    return found


def test_module_names_the_public_path() -> None:
    import sessionkeeper.records
    import sessionkeeper.store
    import sessionkeeper.transcript

    assert sessionkeeper.transcript.TranscriptManager.__module__ == "sessionkeeper.transcript"
    assert sessionkeeper.store.SessionStore.__module__ == "sessionkeeper.store"
    assert sessionkeeper.hooks.HookRegistry.__module__ == "sessionkeeper.hooks"
    assert repr(sessionkeeper.TranscriptManager) == "<class 'sessionkeeper.transcript.TranscriptManager'>"
    # a re-export keeps its home's path: transcript re-exports the records, it does not claim them
    assert not sessionkeeper.transcript.utf16_len.__module__.startswith("sessionkeeper.transcript")


def test_a_public_module_path_finds_the_object_and_pickles_by_reference() -> None:
    import importlib
    import pickle

    moved = 0
    for _, obj in _exported_definitions():
        module = obj.__module__  # type: ignore[attr-defined]
        if any(part.startswith("_") for part in module.split(".")[1:]):
            continue
        moved += 1
        target: object = importlib.import_module(module)
        for part in obj.__qualname__.split("."):  # type: ignore[attr-defined]
            target = getattr(target, part)
        assert target is obj, f"{module}.{obj.__qualname__} is another object"  # type: ignore[attr-defined]
        assert pickle.loads(pickle.dumps(obj)) is obj
    assert moved > 200


def test_moved_classes_keep_their_type_hints() -> None:
    """
    msgspec, cattrs and ``typing.get_type_hints`` evaluate string annotations in ``__module__``: every
    class that names a public module resolves its hints there, each msgspec record its field types
    and each attrs class resolves its field types (``set_public_module`` moves a class with its own
    annotations evaluated where they were written, or not at all).
    """
    import importlib
    import inspect
    import typing

    import attrs
    import msgspec

    checked = 0
    for _, obj in _exported_definitions():
        if not inspect.isclass(obj) or obj.__module__.count("._"):
            continue
        public_file = importlib.import_module(obj.__module__).__file__
        codes = [f.__code__ for f in vars(obj).values() if hasattr(f, "__code__")]
        if any(code.co_filename == public_file for code in codes):
            continue  # defined in the public module itself: not moved (its hints are its own business)
        typing.get_type_hints(obj)  # raises NameError if a name is missing in the public module
        if issubclass(obj, msgspec.Struct):
            msgspec.structs.fields(obj)  # resolves the field types
        elif attrs.has(obj):
            attrs.resolve_types(obj)
        checked += 1
    assert checked > 150
