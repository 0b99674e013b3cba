"""Every Python example of ``docs/testing.md`` runs as printed (issue 11: the kit for users)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest


PAGE = Path(__file__).resolve().parent.parent.parent / "docs" / "testing.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_the_page_has_its_examples() -> None:
    assert len(BLOCKS) >= 6
    assert any("next_turn" in block for block in BLOCKS)
    assert any("run_backend_conformance" in block for block in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_example_runs(block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TZ", "UTC")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(compile(block, str(PAGE), "exec"), {"__name__": "docs_testing_example"})
