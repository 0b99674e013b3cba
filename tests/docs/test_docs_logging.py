"""``docs/logging.md`` names every logger the library uses, and the guides link it (issue #11)."""

from __future__ import annotations

import re
from pathlib import Path

import sessionkeeper


REPO = Path(__file__).resolve().parents[2]


def test_every_library_logger_is_documented() -> None:
    names = set()
    for path in Path(sessionkeeper.__file__).parent.rglob("*.py"):  # as installed (a wheel: no src/)
        names |= set(re.findall(r'getLogger\("(sessionkeeper[.\w]*)"\)', path.read_text(encoding="utf-8")))
    assert "sessionkeeper.compaction" in names and "sessionkeeper.maintenance" in names
    page = (REPO / "docs" / "logging.md").read_text(encoding="utf-8")
    missing = sorted(name for name in names - {"sessionkeeper"} if f"`{name}`" not in page)
    assert missing == []


def test_the_logging_page_is_in_the_toctree() -> None:
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    assert re.search(r"^logging$", index, re.MULTILINE)
