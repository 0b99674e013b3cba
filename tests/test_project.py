"""Project-level contracts: the README's commands, CI, public exports, packaging metadata."""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

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
    for path in Path(sessionkeeper.__file__).parent.rglob("*.py"):  # as installed (a wheel: no src/)
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


# --- the version from git tags (pyproject [tool.hatch.version], docs/release.md) ---------------------------


def _git_env() -> dict[str, str]:
    """This environment without ``GIT_*`` (a hook's ``GIT_DIR`` would point elsewhere), and no user config."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env |= {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,  # no user setting (signing, hooks) changes what is committed
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return env


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=_git_env(), capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _hatchling(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "hatchling", *args],
        cwd=cwd,
        env=_git_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """A git repository holding this project's ``pyproject.toml`` and a one-module package, one commit."""
    (tmp_path / "src" / "sessionkeeper").mkdir(parents=True)
    (tmp_path / "src" / "sessionkeeper" / "__init__.py").write_text('"""x"""\n', encoding="utf-8")
    (tmp_path / "README.md").write_text("x\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_bytes((REPO / "pyproject.toml").read_bytes())
    (tmp_path / ".gitignore").write_bytes((REPO / ".gitignore").read_bytes())
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def test_version_follows_the_release_tags(project_copy: Path) -> None:
    head = _git(project_copy, "rev-parse", "--short=9", "HEAD")
    untagged = _hatchling(project_copy, "version")
    assert re.fullmatch(rf"0\.1\.dev1\+g{head[:7]}\w*", untagged), untagged  # no tag yet: 0.1.devN
    _git(project_copy, "tag", "-a", "v1.2.3", "-m", "sessionkeeper 1.2.3")
    assert _hatchling(project_copy, "version") == "1.2.3"
    (project_copy / "CHANGELOG.md").write_text("x\n", encoding="utf-8")
    _git(project_copy, "add", "-A")
    _git(project_copy, "commit", "-q", "-m", "after the release")
    after = _hatchling(project_copy, "version")
    assert re.fullmatch(r"1\.2\.4\.dev1\+g\w+", after), after  # the next patch's dev build


def test_a_tree_without_git_metadata_builds_the_fallback_version(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_bytes((REPO / "pyproject.toml").read_bytes())
    (tmp_path / "README.md").write_text("x\n", encoding="utf-8")
    assert _hatchling(tmp_path, "version") == "0.0"  # hatch-vcs fallback-version: no release is 0.0


def test_the_wheel_carries_its_version_as_a_constant(project_copy: Path) -> None:
    _git(project_copy, "tag", "-a", "v2.0.0", "-m", "sessionkeeper 2.0.0")
    _hatchling(project_copy, "build", "-t", "wheel")
    (wheel,) = (project_copy / "dist").glob("*.whl")
    assert wheel.name.startswith("sessionkeeper-2.0.0-")
    with zipfile.ZipFile(wheel) as archive:
        written = archive.read("sessionkeeper/_build_version.py").decode()
    assert 'version = "2.0.0"' in written.splitlines()
    assert _git(project_copy, "status", "--porcelain") == ""  # the written file is ignored by git


def test_version_is_pep440_and_the_installed_distributions() -> None:
    from importlib.metadata import version

    from packaging.version import Version

    assert sessionkeeper.__version__ == version("sessionkeeper")
    assert str(Version(sessionkeeper.__version__)) == sessionkeeper.__version__


# --- tests/check_dist.py, the release artifacts' checks .ci/run applies ----------------------------------


def _check_dist_module() -> Any:
    spec = importlib.util.spec_from_file_location("check_dist", REPO / "tests" / "check_dist.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wheel(folder: Path, version: str, files: dict[str, str]) -> Path:
    path = folder / f"sessionkeeper-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def _sdist(folder: Path, version: str, files: dict[str, str]) -> Path:
    import io
    import tarfile

    path = folder / f"sessionkeeper-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            member = tarfile.TarInfo(f"sessionkeeper-{version}/{name}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return path


def _good_wheel_files(version: str) -> dict[str, str]:
    info = f"sessionkeeper-{version}.dist-info"
    return {
        "sessionkeeper/__init__.py": "",
        "sessionkeeper/py.typed": "",
        "sessionkeeper/_build_version.py": f'"""x"""\n\nversion = "{version}"\n',
        "sessionkeeper/_samples/basic.jsonl": "{}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.4\nName: sessionkeeper\nVersion: {version}\n",
        f"{info}/entry_points.txt": "[console_scripts]\nsessionkeeper = sessionkeeper.cli:main\n",
    }


def _good_sdist_files(version: str) -> dict[str, str]:
    files = dict.fromkeys(_check_dist_module()._SDIST_NEEDS, "")
    files["PKG-INFO"] = f"Metadata-Version: 2.4\nName: sessionkeeper\nVersion: {version}\n"
    files["src/sessionkeeper/_build_version.py"] = f'version = "{version}"\n'
    files["CHANGELOG.md"] = f"# Changelog\n\n## Unreleased\n\n## {version} - 2026-12-01\n\n### Added\n- x\n"
    return files


def test_check_dist_accepts_a_complete_wheel_and_sdist(tmp_path: Path) -> None:
    check = _check_dist_module()
    _wheel(tmp_path, "1.2.3", _good_wheel_files("1.2.3"))
    _sdist(tmp_path, "1.2.3", _good_sdist_files("1.2.3"))
    assert check.check_dist(tmp_path) == []
    assert check.main([str(tmp_path)]) == 0


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"tests/test_x.py": ""}, "wheel: holds tests/test_x.py"),
        ({"sessionkeeper/benchmarks/b.py": ""}, "wheel: holds sessionkeeper/benchmarks/b.py"),
        ({"sessionkeeper/__pycache__/x.cpython-311.pyc": ""}, "wheel: holds sessionkeeper/__pycache__/"),
        ({"sessionkeeper/py.typed": None}, "wheel: no sessionkeeper/py.typed"),
        ({"sessionkeeper/_samples/basic.jsonl": None}, "wheel: no sessionkeeper/_samples/*.jsonl"),
        ({"sessionkeeper/_build_version.py": 'version = "9"\n'}, "_build_version.py says '9'"),
        ({"sessionkeeper-1.2.3.dist-info/entry_points.txt": None}, "no console script"),
    ],
)
def test_check_dist_names_what_is_wrong_with_a_wheel(
    tmp_path: Path, change: dict[str, str | None], problem: str
) -> None:
    files = _good_wheel_files("1.2.3")
    for name, text in change.items():
        if text is None:
            del files[name]
        else:
            files[name] = text
    problems = _check_dist_module().check_wheel(_wheel(tmp_path, "1.2.3", files))
    assert any(problem in found for found in problems), problems


def test_check_dist_names_what_is_wrong_with_an_sdist(tmp_path: Path) -> None:
    files = _good_sdist_files("1.2.3")
    del files["tests/conftest.py"]
    files[".venv/bin/python"] = ""
    files["PKG-INFO"] = "Metadata-Version: 2.4\nName: sessionkeeper\nVersion: 1.2.4\n"
    problems = _check_dist_module().check_sdist(_sdist(tmp_path, "1.2.3", files))
    assert problems == [
        "sdist: holds .venv/bin/python",
        "sdist: no tests/conftest.py",
        "sdist: PKG-INFO is not version 1.2.3",
    ]


def test_check_dist_wants_one_wheel_and_one_sdist_of_one_version(tmp_path: Path) -> None:
    check = _check_dist_module()
    _wheel(tmp_path, "1.2.3", _good_wheel_files("1.2.3"))
    assert "expected one wheel and one sdist" in check.check_dist(tmp_path)[0]
    _sdist(tmp_path, "1.2.4", _good_sdist_files("1.2.4"))
    assert check.check_dist(tmp_path) == ["the wheel is 1.2.3, the sdist 1.2.4"]
    assert check.main([str(tmp_path)]) == 1


def test_check_dist_wants_the_changelog_section_of_a_release_only(tmp_path: Path) -> None:
    check = _check_dist_module()
    files = _good_sdist_files("1.2.3")
    files["CHANGELOG.md"] = "# Changelog\n\n## Unreleased\n\n### Added\n- x\n"
    problems = check.check_sdist(_sdist(tmp_path, "1.2.3", files))
    assert problems == ["sdist: CHANGELOG.md has no section '## 1.2.3 - YYYY-MM-DD' (docs/release.md)"]
    dev = "0.1.dev5+g1a2b3c4"
    files = _good_sdist_files(dev)
    files["CHANGELOG.md"] = "# Changelog\n\n## Unreleased\n"
    assert check.check_sdist(_sdist(tmp_path, dev, files)) == []  # a dev build needs no section
    assert [check.is_release(v) for v in ("1.2.3", "0.2.0rc1", "1.0.post1", "1.2.4.dev1", "0.1.dev5+g1")] == [
        True,
        True,
        True,
        False,
        False,
    ]


# --- CHANGELOG.md: Keep a Changelog, one section per release (docs/release.md) ---------------------------

_KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")


def _changelog_sections() -> list[tuple[str, list[str]]]:
    """``(## heading, [### headings under it])`` in file order."""
    sections: list[tuple[str, list[str]]] = []
    for line in (REPO / "CHANGELOG.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            sections.append((line[3:], []))
        elif line.startswith("### "):
            assert sections, f"CHANGELOG.md: {line!r} before any ## section"
            sections[-1][1].append(line[4:])
    return sections


def test_changelog_opens_with_unreleased_then_releases_newest_first() -> None:
    from packaging.version import Version

    sections = _changelog_sections()
    assert sections and sections[0][0] == "Unreleased"
    released = []
    for heading, _ in sections[1:]:
        found = re.fullmatch(r"(\S+) - (\d{4}-\d{2}-\d{2})", heading)
        assert found, f"CHANGELOG.md: release heading {heading!r} is not '## X.Y.Z - YYYY-MM-DD'"
        released.append((Version(found.group(1)), found.group(2)))
    assert released == sorted(released, reverse=True), "releases must be newest first"
    assert len({version for version, _ in released}) == len(released), "a version listed twice"


def test_changelog_sections_use_the_keep_a_changelog_kinds_once_each() -> None:
    for heading, kinds in _changelog_sections():
        unknown = [kind for kind in kinds if kind not in _KINDS]
        assert unknown == [], f"CHANGELOG.md ## {heading}: unknown kinds {unknown} (use {_KINDS})"
        assert len(set(kinds)) == len(kinds), f"CHANGELOG.md ## {heading}: a kind appears twice: {kinds}"


def test_release_doc_is_in_the_docs_toctree_and_names_the_steps() -> None:
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    assert re.search(r"^release$", index, flags=re.MULTILINE)
    page = (REPO / "docs" / "release.md").read_text(encoding="utf-8")
    for step in ("git tag -a vX.Y.Z", "python -m build", "twine check --strict", "tests/check_dist.py"):
        assert step in page, step
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    for step in ("python -m build", "twine check --strict", "tests/check_dist.py"):
        assert step in ci, step


MAX_MODULE_LINES = 600
"""The longest a module of the package may be (issue 12: one module per rule, none over 600 lines)."""


def test_no_module_is_longer_than_the_limit() -> None:
    too_long = {
        str(path.relative_to(REPO)): n
        for path in sorted((REPO / "src" / "sessionkeeper").rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not too_long, f"split these modules (over {MAX_MODULE_LINES} lines): {too_long}"
