"""
Check the release artifacts in a folder: one sdist and one wheel of the same version (docs/release.md).

``.ci/run`` builds them once (``python -m build``: the sdist, then the wheel from the unpacked sdist) and
runs ``python tests/check_dist.py DIST`` after ``twine check``. What a user installs must hold:

- wheel: only ``sessionkeeper/`` and its ``.dist-info``; ``py.typed`` (PEP 561), the bundled samples,
  ``_build_version.py`` saying the wheel's version, the ``sessionkeeper`` console script; no tests,
  benchmarks or byte code;
- sdist: one top folder ``sessionkeeper-VERSION/`` with ``PKG-INFO`` of that version, the package (its
  ``_build_version.py`` too: a wheel built from the sdist has no git to ask), the tests and the docs; no
  virtualenv, git or cache folders; for a release version (no ``.dev``, no ``+local``), its section
  ``## VERSION - YYYY-MM-DD`` in ``CHANGELOG.md``.

Prints each problem on a line and exits 1 when there is any; ``tests/test_project.py`` tests the checks.
"""

from __future__ import annotations

import re
import sys
import tarfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path


PACKAGE = "sessionkeeper"
_NEVER_IN_WHEEL = {"tests", "benchmarks", "__pycache__", "docs", "examples"}
_NEVER_IN_SDIST = {
    ".venv",
    ".git",
    "__pycache__",
    ".nox",
    ".mypy_cache",
    ".ruff_cache",
    "node_modules",
    "dist",
}
_SDIST_NEEDS = (
    "PKG-INFO",
    "pyproject.toml",
    "README.md",
    "CHANGELOG.md",
    "LICENSE",
    f"src/{PACKAGE}/__init__.py",
    f"src/{PACKAGE}/py.typed",
    f"src/{PACKAGE}/_build_version.py",
    "tests/conftest.py",
    "docs/index.md",
)


def is_release(version: str) -> bool:
    """Whether ``version`` is one a tag gives (``1.2.3``, ``1.2.3rc1``, ``1.2.3.post1``), not a dev build."""
    return re.fullmatch(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?", version) is not None


def _built_version(text: str) -> str | None:
    found = re.search(r'^version = "([^"]+)"$', text, flags=re.MULTILINE)
    return found.group(1) if found else None


def check_wheel(path: Path) -> list[str]:
    """Problems of the wheel at ``path`` (empty: fine). Its version is read from the file name."""
    name = re.fullmatch(rf"{PACKAGE}-([^-]+)-py3-none-any\.whl", path.name)
    if name is None:
        return [f"{path.name}: not a pure-Python wheel of {PACKAGE}"]
    version = name.group(1)
    info = f"{PACKAGE}-{version}.dist-info"
    problems: list[str] = []
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        tops = {item.split("/", 1)[0] for item in names}
        if tops != {PACKAGE, info}:
            problems.append(f"wheel: top-level entries {sorted(tops)}, expected {[PACKAGE, info]}")
        for item in names:
            parts = set(item.split("/"))
            if parts & _NEVER_IN_WHEEL or item.endswith((".pyc", ".pyo")):
                problems.append(f"wheel: holds {item}")
        needs = (f"{PACKAGE}/__init__.py", f"{PACKAGE}/py.typed", f"{PACKAGE}/_build_version.py")
        problems += [f"wheel: no {needed}" for needed in needs if needed not in names]
        if not any(re.fullmatch(rf"{PACKAGE}/_samples/[^/]+\.jsonl", item) for item in names):
            problems.append(f"wheel: no {PACKAGE}/_samples/*.jsonl (sessionkeeper demo reads them)")
        if f"{PACKAGE}/_build_version.py" in names:
            built = _built_version(archive.read(f"{PACKAGE}/_build_version.py").decode("utf-8"))
            if built != version:
                problems.append(f"wheel: _build_version.py says {built!r}, the wheel is {version}")
        if f"{info}/METADATA" in names:
            metadata = HeaderParser().parsestr(archive.read(f"{info}/METADATA").decode("utf-8"))
            if metadata["Version"] != version:
                problems.append(f"wheel: METADATA Version {metadata['Version']!r}, the wheel is {version}")
        else:
            problems.append(f"wheel: no {info}/METADATA")
        scripts = (
            archive.read(f"{info}/entry_points.txt").decode() if f"{info}/entry_points.txt" in names else ""
        )
        if f"{PACKAGE} = {PACKAGE}.cli:main" not in scripts.splitlines():
            problems.append(f"wheel: no console script `{PACKAGE} = {PACKAGE}.cli:main`")
    return problems


def check_sdist(path: Path) -> list[str]:
    """Problems of the sdist at ``path`` (empty: fine). Its version is read from the file name."""
    name = re.fullmatch(rf"{PACKAGE}-(.+)\.tar\.gz", path.name)
    if name is None:
        return [f"{path.name}: not an sdist of {PACKAGE}"]
    version = name.group(1)
    top = f"{PACKAGE}-{version}"
    problems: list[str] = []
    with tarfile.open(path, "r:gz") as archive:
        members = {member.name: member for member in archive.getmembers()}
        tops = {item.split("/", 1)[0] for item in members}
        if tops != {top}:
            problems.append(f"sdist: top-level entries {sorted(tops)}, expected [{top!r}]")
        inside = {item.split("/", 1)[1] for item in members if "/" in item}
        problems += [
            f"sdist: holds {item}" for item in sorted(inside) if set(item.split("/")) & _NEVER_IN_SDIST
        ]
        problems += [f"sdist: no {needed}" for needed in _SDIST_NEEDS if needed not in inside]

        def text(item: str) -> str:
            extracted = archive.extractfile(members[f"{top}/{item}"])
            return extracted.read().decode("utf-8") if extracted is not None else ""

        if "PKG-INFO" in inside and HeaderParser().parsestr(text("PKG-INFO"))["Version"] != version:
            problems.append(f"sdist: PKG-INFO is not version {version}")
        built_file = f"src/{PACKAGE}/_build_version.py"
        if built_file in inside and _built_version(text(built_file)) != version:
            problems.append(f"sdist: {built_file} does not say {version}")
        section = re.compile(rf"^## {re.escape(version)} - \d{{4}}-\d{{2}}-\d{{2}}$", flags=re.MULTILINE)
        if is_release(version) and "CHANGELOG.md" in inside and not section.search(text("CHANGELOG.md")):
            problems.append(
                f"sdist: CHANGELOG.md has no section '## {version} - YYYY-MM-DD' (docs/release.md)"
            )
    return problems


def check_dist(folder: Path) -> list[str]:
    """Problems of the one wheel and one sdist in ``folder``, and whether their versions agree."""
    wheels = sorted(folder.glob("*.whl"))
    sdists = sorted(folder.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        return [f"{folder}: expected one wheel and one sdist, found {[p.name for p in [*wheels, *sdists]]}"]
    problems = check_wheel(wheels[0]) + check_sdist(sdists[0])
    wheel_version = wheels[0].name.split("-")[1]
    sdist_version = sdists[0].name.removeprefix(f"{PACKAGE}-").removesuffix(".tar.gz")
    if wheel_version != sdist_version:
        problems.append(f"the wheel is {wheel_version}, the sdist {sdist_version}")
    return problems


def main(argv: list[str]) -> int:
    """``python tests/check_dist.py DIST``: print the problems, exit 1 if any, else 0."""
    if len(argv) != 1:
        print("usage: python tests/check_dist.py DIST", file=sys.stderr)
        return 2
    problems = check_dist(Path(argv[0]))
    for problem in problems:
        print(f"check_dist: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_dist: {', '.join(sorted(p.name for p in Path(argv[0]).iterdir()))}: fine")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
