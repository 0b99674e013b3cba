"""The kit for contributors: every environment variable the tests read is documented; oracles via fixtures."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parent.parent
_ENV_READ = re.compile(r"""(?:environ\.get\(|environ\[|getenv\()\s*["']([A-Z][A-Z0-9_]+)["']""")


def _python_files() -> list[Path]:
    files = [*REPO.joinpath("tests").rglob("*.py"), *REPO.joinpath("benchmarks").rglob("*.py")]
    # benchmarks/.data (git-ignored) holds generated files and the peers benchmark's venv
    files = [f for f in files if ".data" not in f.relative_to(REPO).parts]
    return sorted(f for f in [*files, REPO / "noxfile.py"] if f.is_file())


def _variables() -> set[str]:
    return {name for path in _python_files() for name in _ENV_READ.findall(path.read_text(encoding="utf-8"))}


def test_the_scan_finds_the_oracle_variables() -> None:
    assert {
        "SESSIONKEEPER_SHARED",
        "SESSIONKEEPER_ORACLE_CACHE",
        "SESSIONKEEPER_PI_ORACLE_DIR",
    } <= _variables()


@pytest.mark.parametrize("name", sorted(_variables()))
def test_every_variable_the_tests_read_is_in_contributing(name: str) -> None:
    contributing = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert f"`{name}`" in contributing, f"CONTRIBUTING.md does not document ${name}"


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)


def _paths_outside_main(path: Path, prefix: str) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for statement in tree.body
        if not _is_main_guard(statement)  # a regeneration script run by hand may default to a local install
        for node in ast.walk(statement)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(prefix)
    ]


_TEST_MODULES = sorted(p for p in REPO.joinpath("tests").rglob("test_*.py") if p.name != Path(__file__).name)


@pytest.mark.parametrize("path", _TEST_MODULES, ids=lambda p: p.name)
def test_tests_get_the_pi_oracle_from_the_fixture(path: Path) -> None:
    """A hard-coded install path skips everywhere but on the machine that has it (CI never ran the test)."""
    assert _paths_outside_main(path, "/tmp/pi-oracle") == [], f"{path}: use the pi_oracle fixture"
