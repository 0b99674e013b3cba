"""
The Python blocks of the reference guides run (issue #17: every code block of the docs runs in CI).

Each guide (every ``docs/*.md`` but the tutorials, which ``test_docs_pages.py`` runs with their shell
blocks) is run as a reader would paste it into ``python -m asyncio``: its blocks in order, in one namespace,
in an empty folder. A block that shows an excerpt of a host's own code (it uses the reader's config file,
database, model client or the variables of a surrounding loop) is listed in ``EXCERPTS`` with what it
needs: it is compiled, not run. The list must stay exact: an excerpt that is no longer on its page fails
the test, so it cannot outlive its block.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import warnings
from pathlib import Path

import pytest
from tests.docs._pages import DOCS, Block, blocks


# (page, the start of the block's first line) -> what the excerpt needs that a fresh folder does not have
EXCERPTS: dict[tuple[str, str], str] = {
    (
        "compaction.md",
        "from sessionkeeper.compaction import prepare_compaction",
    ): "a transcript session.jsonl",
    (
        "compaction.md",
        "from sessionkeeper.compaction import Compactor, CompactionSettings",
    ): "the host's client",
    ("core.md", "from sessionkeeper import load_config"): "the reader's ~/.openclaw/openclaw.json",
    (
        "locking.md",
        "from sessionkeeper.transcript import TranscriptManager, WriteLockSettings",
    ): "a transcript",
    ("locking.md", "from sessionkeeper.transcript import SessionWriteLock"): "a transcript path",
    ("locking.md", "from sessionkeeper import load_config"): "the reader's openclaw.json",
    ("maintenance.md", "from sessionkeeper import load_config"): "the reader's openclaw.json",
    (
        "openclaw_import.md",
        "from sessionkeeper.openclaw import import_openclaw_database, read_agent_database",
    ): ("an OpenClaw agent database"),
    ("postgres.md", "from sessionkeeper.store import PostgresStoreBackend, PostgresTranscriptStorage"): (
        "the reader's PostgreSQL server"
    ),
    (
        "pruning.md",
        "from sessionkeeper.pruning import Pruner, PruningSettings, read_last_cache_touch, read_prune_ledger",
    ): ("a loop's branch entries and context"),
    ("pruning.md", "from sessionkeeper.pruning import build_cache_ttl_entry"): "a loop's leaf id and clock",
    ("pruning.md", "from sessionkeeper.pruning import resolve_replay_policy, sanitize_replay_history"): (
        "a loop's context"
    ),
    ("runtime.md", "from sessionkeeper.transcript import estimate_context_usage"): "a loop's context",
    ("runtime.md", "from sessionkeeper.runtime import OverflowRecoveryState, plan_overflow_recovery"): (
        "a provider error"
    ),
    ("runtime.md", "from sessionkeeper import load_config   # the project's one config loader"): (
        "the reader's openclaw.json"
    ),
    ("runtime.md", "from sessionkeeper.runtime import ModelInfo, RuntimeSettings, SessionRuntime"): (
        "the host's config, client and model call"
    ),
    ("store.md", "from sessionkeeper.store import SessionStore, apply_parent_fork"): "a sessions directory",
    (
        "transcripts.md",
        'tm = await TranscriptManager.open("sessions/demo.jsonl")        # inline while writes are < 1 ms',
    ): ("an NFS mount"),
    ("transcripts.md", "a = await TranscriptManager.open(path)          # two writers (or two processes)"): (
        "a transcript path"
    ),
    (
        "transcripts.md",
        'tm = await TranscriptManager.open("sessions/demo.jsonl")',
    ): "a leaf id of the reader's",
    ("transcripts.md", "from sessionkeeper.transcript import ("): "a transcript sessions/abc.jsonl",
}

GUIDES = sorted(p for p in DOCS.glob("*.md") if not p.stem.startswith("tutorial_") and blocks(p, "python"))


def _key(page: Path, block: Block) -> tuple[str, str] | None:
    first = block.text.splitlines()[0].rstrip()
    matches = [key for key in EXCERPTS if key[0] == page.name and first.startswith(key[1])]
    return max(matches, key=lambda key: len(key[1])) if matches else None  # the longest start wins


def _compile(page: Path, block: Block) -> object:
    source = "\n" * (block.line - 1) + block.text
    return compile(source, str(page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def _fresh_tracer_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """
    Let a page set OpenTelemetry's global tracer provider, as in a fresh process: the API allows one
    ``set_tracer_provider`` per process and tests/core/test_core_tracing.py may have set it already.
    The API's own test utilities reset the same two globals; monkeypatch restores them afterwards.
    """
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: p.stem)
def test_guide_blocks_run_in_order(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    if page.stem == "tracing":
        _fresh_tracer_provider(monkeypatch)
    monkeypatch.setenv("TZ", "UTC")
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    ran = 0
    with warnings.catch_warnings(), asyncio.Runner() as runner:
        warnings.simplefilter("error")
        for block in blocks(page, "python"):
            code = _compile(page, block)
            if _key(page, block) is not None:
                continue
            if code.co_flags & inspect.CO_COROUTINE:  # type: ignore[attr-defined]
                runner.run(eval(code, namespace))  # type: ignore[arg-type]
            else:
                exec(code, namespace)  # type: ignore[arg-type]
            ran += 1
    assert ran or all(_key(page, b) is not None for b in blocks(page, "python"))


def test_every_listed_excerpt_is_still_on_its_page() -> None:
    present = {_key(page, block) for page in GUIDES for block in blocks(page, "python")}
    assert sum(1 for page in GUIDES for b in blocks(page, "python") if _key(page, b)) == len(EXCERPTS)
    stale = sorted(set(EXCERPTS) - present)
    assert stale == [], f"EXCERPTS lists blocks no page has: {stale}"


def test_most_guide_blocks_run() -> None:
    total = sum(len(blocks(page, "python")) for page in GUIDES)
    assert total - len(EXCERPTS) >= 2 * len(EXCERPTS) // 3, (total, len(EXCERPTS))
