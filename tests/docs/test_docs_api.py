"""
The API reference (docs/api/*.md) documents every public name exactly once, on the page of its task (#17).

A name a module exports is documented in its *home*: the public module named by the object's
``__module__`` when that module exports it (``set_public_module`` sets it), else the first exporting module
in ``ORDER`` (records before transcript, maintenance before store, a package before the facade). Every
other module that exports it must leave it out (``:exclude-members:``), or Sphinx documents it twice.
Constants and type aliases are named one by one (``.. autodata::``): autodoc's ``automodule`` leaves out
the data a package ``__init__`` imports. ``docs/_checks/test_site.py`` checks the built inventory too.
``tests/docs/regen_api_pages.py`` writes the directive blocks; these tests check what it wrote.
"""

from __future__ import annotations

import importlib
import re
from collections import Counter
from pathlib import Path

import pytest
from tests.docs.regen_api_pages import NOT_DOCUMENTED, ORDER, PAGES, home_modules, render


REPO = Path(__file__).resolve().parents[2]
API = REPO / "docs" / "api"


def _public_modules() -> list[str]:
    snapshot = (REPO / "tests" / "data" / "public_api.txt").read_text(encoding="utf-8")
    return re.findall(r"^\[([\w.]+)\]$", snapshot, flags=re.MULTILINE)


def _homes() -> set[tuple[str, str]]:
    """``(home module, name)`` of every documented public name."""
    return {(home, member) for (_, member), home in home_modules().items()} - NOT_DOCUMENTED


def _documented() -> Counter[tuple[str, str]]:
    found: Counter[tuple[str, str]] = Counter()
    for page in sorted(API.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for name, options in re.findall(r"^\.\. automodule:: ([\w.]+)\n((?:   :.*\n)*)", text, re.MULTILINE):
            opts = dict(re.findall(r"^   :([\w-]+):(.*)$", options, flags=re.MULTILINE))
            module = importlib.import_module(name)
            explicit = [m.strip() for m in opts.get("members", "").split(",") if m.strip()]
            excluded = {m.strip() for m in opts.get("exclude-members", "").split(",") if m.strip()}
            for member in explicit or [m for m in module.__all__ if m not in excluded]:
                found[name, member] += 1
        # constants and type aliases: autodoc's automodule leaves out data it imported, so each is named
        for qualified in re.findall(r"^\.\. autodata:: ([\w.]+)$", text, flags=re.MULTILINE):
            module_name, _, member = qualified.rpartition(".")
            found[module_name, member] += 1
    return found


def test_every_module_with_names_is_in_the_order() -> None:
    public = [m for m in _public_modules() if importlib.import_module(m).__all__]
    assert sorted(public) == sorted(ORDER)


def test_every_public_name_is_documented_exactly_once() -> None:
    documented, homes = _documented(), _homes()
    twice = sorted(key for key, count in documented.items() if count > 1)
    assert twice == [], f"documented more than once: {twice}"
    missing = sorted(homes - set(documented))
    assert missing == [], f"public names on no API page: {missing}"
    elsewhere = sorted(set(documented) - homes)
    assert elsewhere == [], f"documented outside their home module (exclude them there): {elsewhere}"


@pytest.mark.parametrize("page", sorted(API.glob("*.md")), ids=lambda p: p.stem)
def test_the_task_tables_name_real_things(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    exported = {m for name in ORDER for m in importlib.import_module(name).__all__}
    for row in re.findall(r"^\| [^|]+ \| (.+) \|$", text, flags=re.MULTILINE):
        for ref in re.findall(r"`([A-Za-z_][\w.]*)`", row):
            head, _, attr = ref.partition(".")
            if ref.startswith("sessionkeeper"):
                importlib.import_module(ref)
                continue
            assert head in exported, f"{page.name}: `{ref}` is no public name"
            if attr:
                home = next(
                    importlib.import_module(n) for n in ORDER if head in importlib.import_module(n).__all__
                )
                assert hasattr(getattr(home, head), attr), f"{page.name}: `{ref}` does not exist"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_directives_are_up_to_date(page: str) -> None:
    current = (API / f"{page}.md").read_text(encoding="utf-8")
    assert current == render(page, home_modules()), "run: .venv/bin/python tests/docs/regen_api_pages.py"


def test_every_api_page_is_in_the_toctree() -> None:
    index = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    assert sorted(re.findall(r"^api/(\w+)$", index, flags=re.MULTILINE)) == sorted(
        p.stem for p in API.glob("*.md")
    )
