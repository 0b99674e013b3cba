"""
The architecture, written down in code: sessionkeeper's layers and who may import whom.

Data flows down. A module may import from its own layer and from the layers below it, never from above;
and it may import a private module (``_name``) only of its own package. Between packages, names travel
through the package's public ``__init__`` (or a public module such as ``sessionkeeper.hooks``).

The core (the top-level ``sessionkeeper._*`` modules: config, clock, file safety, tokens, hooks, model
client seam, silent replies) is the library's shared base: its private modules may be imported by the
layers above it (the CLI, this distribution's operator tool, included), but not by the optional
``adapters``, which use public names only, as a third-party package would. ``CONTRIBUTING.md`` draws
the same picture; ``../shared/DESIGN.md`` "Layers" is the design it follows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest


SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "sessionkeeper"

# Bottom to top. A layer may import itself and anything earlier in this list.
LAYERS: tuple[str, ...] = (
    "exceptions",  # sessionkeeper.exceptions: the error tree, imports nothing of ours
    "records",  # wire records, codec, JavaScript compatibility
    "core",  # sessionkeeper._* top-level modules and sessionkeeper.hooks
    "transcript",
    "store",
    "openclaw",  # OpenClaw 2026.8+ agent databases, read-only (import-openclaw)
    "pruning",
    "compaction",
    "runtime",
    "testing",
    "facade",  # sessionkeeper/__init__.py, sessionkeeper.abc: the public names, lazily
    "adapters",  # optional extras over vendor SDKs: public names only, like a third party
    "cli",
)
RANK = {name: i for i, name in enumerate(LAYERS)}
SHELLS = frozenset({"adapters"})  # public names only, core included


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    if module in {"sessionkeeper", "sessionkeeper.abc"}:
        return "facade"
    if module == "sessionkeeper.__main__":
        return "cli"
    if module == "sessionkeeper.exceptions":
        return "exceptions"
    if len(parts) >= 2 and (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return "core"


def _package(module: str) -> str:
    """The package a module belongs to, for the private-module rule (the core is ``sessionkeeper``)."""
    parts = module.split(".")
    if len(parts) >= 2 and (PACKAGE / parts[1]).is_dir():
        return ".".join(parts[:2])
    return "sessionkeeper"


def _private_part(module: str) -> str | None:
    """The first private segment (``_x``) of a dotted module path, if any."""
    for part in module.split(".")[1:]:
        if part.startswith("_") and not part.startswith("__"):
            return part
    return None


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every ``sessionkeeper`` module ``path`` imports, with its line (TYPE_CHECKING and lazy ones too)."""
    module = _module_name(path)
    is_package = path.name == "__init__.py"
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.startswith("sessionkeeper"):
                # ``from sessionkeeper.x import _y`` where _y is a module counts as importing _y
                for alias in node.names:
                    candidate = f"{target}.{alias.name}"
                    is_module = (SRC / Path(*candidate.split("."))).with_suffix(".py").exists() or (
                        SRC / Path(*candidate.split("."))
                    ).is_dir()
                    found.append((node.lineno, candidate if is_module else target))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names if a.name.startswith("sessionkeeper"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # lazy-import tables ("Name": "sessionkeeper.pkg._module") are imports too
            text = node.value
            if text.startswith("sessionkeeper.") and " " not in text and ":" not in text:
                candidate = SRC / Path(*text.split("."))
                if candidate.with_suffix(".py").exists() or candidate.is_dir():
                    found.append((node.lineno, text))
    return found


def _violations() -> list[str]:
    problems: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        layer = _layer(module)
        for line, target in _imports(path):
            where = f"{path.relative_to(SRC)}:{line}: {module} -> {target}"
            target_layer = _layer(target)
            if RANK[target_layer] > RANK[layer]:
                problems.append(f"{where}: upward import ({layer} -> {target_layer})")
                continue
            private = _private_part(target)
            if private is None:
                continue
            own = _package(module) == _package(target)
            if layer == "facade" and target_layer != "facade":
                continue  # the facade re-exports from private modules (that is its job)
            if own:
                continue
            if target_layer == "core" and layer not in SHELLS:
                continue  # the shared base, open to the library layers
            problems.append(f"{where}: imports a private module of another package ({private})")
    return problems


def test_no_upward_import_and_no_foreign_private_module() -> None:
    problems = _violations()
    assert not problems, "layer violations:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("sessionkeeper.records._messages", "records"),
        ("sessionkeeper._config", "core"),
        ("sessionkeeper.hooks", "core"),
        ("sessionkeeper.exceptions", "exceptions"),
        ("sessionkeeper.transcript", "transcript"),
        ("sessionkeeper.cli._main", "cli"),
        ("sessionkeeper", "facade"),
    ],
)
def test_modules_are_classified_into_layers(module: str, layer: str) -> None:
    assert _layer(module) == layer


def test_every_package_is_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(LAYERS), f"packages with no layer: {sorted(packages - set(LAYERS))}"


def test_adapters_import_only_names_in_all() -> None:
    """
    The optional adapters use public names only, as a third-party package would: every name they import
    from another sessionkeeper module is in that module's ``__all__`` (not one of the names a package
    ``__init__`` re-exports for the other layers, ``from m import X as X``, outside ``__all__``).
    """
    import importlib

    problems: list[str] = []
    for path in sorted((PACKAGE / "adapters").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if not node.module.startswith("sessionkeeper") or node.module.startswith(
                "sessionkeeper.adapters"
            ):
                continue
            public = set(getattr(importlib.import_module(node.module), "__all__", ()))
            problems.extend(
                f"{path.relative_to(SRC)}:{node.lineno}: {node.module}.{alias.name}"
                for alias in node.names
                if alias.name not in public
            )
    assert not problems, "adapters import names outside __all__:\n" + "\n".join(problems)
