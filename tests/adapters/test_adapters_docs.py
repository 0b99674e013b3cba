"""``docs/adapters.md`` and ``docs/pydantic_ai.md``: their runnable examples run; both are in the index."""

from __future__ import annotations

import re
from pathlib import Path


DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_runnable_example_runs() -> None:
    page = (DOCS / "adapters.md").read_text(encoding="utf-8")
    [example] = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    namespace: dict[str, object] = {}
    exec(compile(example, "docs/adapters.md", "exec"), namespace)
    assert "reply" in namespace and "body" in namespace


def test_the_page_is_in_the_index() -> None:
    assert "\nadapters\n" in (DOCS / "index.md").read_text(encoding="utf-8")


def test_the_pydantic_ai_example_runs() -> None:
    page = (DOCS / "pydantic_ai.md").read_text(encoding="utf-8")
    [example] = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    namespace: dict[str, object] = {}
    exec(compile(example, "docs/pydantic_ai.md", "exec"), namespace)
    assert namespace["outputs"] == ["It is noon.", "It is noon."]
    assert "\npydantic_ai\n" in (DOCS / "index.md").read_text(encoding="utf-8")
