"""The tutorials and concept pages run as printed, top to bottom (issue #17: every code block runs in CI)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests._servers import drop_schema, new_name, require_postgres
from tests.docs._pages import DOCS, blocks, commands, run_page


# the pages written as one session: their blocks build on each other
SESSION_PAGES = sorted(DOCS.glob("tutorial_*.md"))


def test_the_four_tutorials_exist() -> None:
    names = {page.stem for page in SESSION_PAGES}
    assert {"tutorial_agent_loop", "tutorial_plugin", "tutorial_testing", "tutorial_operator"} <= names


@pytest.fixture
def sessions_db(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """A fresh PostgreSQL schema as ``$SESSIONS_DB`` for a page that uses one (the operator tutorial)."""
    page: Path = request.getfixturevalue("page")
    if "$SESSIONS_DB" not in page.read_text(encoding="utf-8"):
        yield None
        return
    schema = new_name("docs")
    yield f"{require_postgres()}?schema={schema}"
    drop_schema(schema)


@pytest.mark.parametrize("page", SESSION_PAGES, ids=lambda p: p.stem)
def test_page_runs_top_to_bottom(
    page: Path, sessions_db: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert blocks(page, "python", "console"), f"{page.name} has no runnable block"
    monkeypatch.chdir(tmp_path)
    if sessions_db is not None:
        monkeypatch.setenv("SESSIONS_DB", sessions_db)
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("COLUMNS", "200")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_page(page)


def test_console_blocks_show_only_sessionkeeper_commands() -> None:
    for page in sorted(DOCS.glob("*.md")):
        for block in blocks(page, "console"):
            assert commands(block), f"{page.name} line {block.line}: a console block without a $ command"
