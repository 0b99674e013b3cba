"""Project-level contracts: the README's commands, CI, public exports, packaging metadata."""

from __future__ import annotations

import importlib
import pkgutil
import re
import tomllib
from pathlib import Path

import pytest

import sessionkeeper


REPO = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_has_exactly_two_install_and_run_lines() -> None:
    commands = _readme_commands()
    assert len(commands) == 2
    demo, tests = commands
    assert demo.startswith("python3 -m venv .venv") and demo.endswith("sessionkeeper demo")
    assert tests.startswith("python3 -m venv .venv") and "pytest" in tests


def test_ci_runs_the_readme_test_line_verbatim() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert _readme_commands()[1] in ci


def _public_modules() -> list[str]:
    names = ["sessionkeeper"]
    for info in pkgutil.walk_packages(sessionkeeper.__path__, "sessionkeeper."):
        parts = info.name.split(".")
        if any(part.startswith("_") for part in parts[1:]):
            continue
        names.append(info.name)
    return names


@pytest.mark.parametrize("name", _public_modules())
def test_public_module_all_is_a_tuple_of_defined_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    if name.startswith("sessionkeeper.cli"):
        pytest.importorskip("click")
    assert isinstance(exported, tuple), f"{name}.__all__ must be a tuple"
    assert len(set(exported)) == len(exported), f"{name}.__all__ has duplicates"
    missing = [item for item in exported if not hasattr(module, item)]
    assert not missing, f"{name}.__all__ names undefined attributes: {missing}"


def test_every_exception_derives_from_the_root() -> None:
    from sessionkeeper import exceptions

    for item in exceptions.__all__:
        cls = getattr(exceptions, item)
        assert issubclass(cls, exceptions.SessionKeeperError), item


def test_package_is_typed_and_declares_python() -> None:
    assert (Path(sessionkeeper.__file__).parent / "py.typed").exists()
    meta = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert meta["project"]["requires-python"] == ">=3.11"
    for dep in ("attrs", "cattrs", "msgspec", "anyio", "tiktoken"):
        assert any(d.startswith(dep) for d in meta["project"]["dependencies"]), dep


def test_top_level_import_is_light_and_names_load_lazily() -> None:
    import subprocess
    import sys

    code = (
        "import sys, sessionkeeper\n"
        "heavy = [m for m in ('sessionkeeper.runtime', 'sessionkeeper.compaction', 'sessionkeeper.store',"
        " 'tiktoken', 'click') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert sessionkeeper.SessionRuntime.__name__ == 'SessionRuntime'\n"
        "assert 'sessionkeeper.runtime' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_top_level_name_raises_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = sessionkeeper.NoSuchThing  # type: ignore[attr-defined]


def test_readme_quickstart_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert (tmp_path / "sessions" / "sessions.json").exists()
    transcripts = list((tmp_path / "sessions").glob("*.jsonl"))
    assert len(transcripts) == 1


def _third_party_imports_of_the_package() -> set[str]:
    import ast
    import sys

    names: set[str] = set()
    for path in (REPO / "src" / "sessionkeeper").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in {"sessionkeeper", "__future__"}}


def test_every_dependency_the_package_imports_is_typed_or_stubbed_in_typings() -> None:
    """
    mypy (``mypy_path``) and pyright (``stubPath``) read local stubs from ``typings/``: a dependency the
    package imports that ships no ``py.typed`` needs a stub there (STYLE 13), or its names turn into ``Any``.
    (tiktoken ships ``py.typed``; its compiled ``_tiktoken`` has no ``.pyi``, so only the typed
    ``tiktoken.Encoding`` API is used: see ``typings/README.md``.)
    """
    import importlib.util

    imported = _third_party_imports_of_the_package()
    assert {"attrs", "cattrs", "msgspec", "anyio", "tiktoken", "json5"} <= imported
    untyped = []
    for module in sorted(imported):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.submodule_search_locations is not None, f"{module} is not installed"
        package_dir = Path(next(iter(spec.submodule_search_locations)))
        if not (package_dir / "py.typed").exists() and not (REPO / "typings" / module).exists():
            untyped.append(module)
    assert not untyped, f"dependencies without inline types and without a stub in typings/: {untyped}"
