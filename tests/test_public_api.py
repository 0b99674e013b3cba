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
        " ('sessionkeeper.exceptions', 'sessionkeeper._version'))\n"
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
