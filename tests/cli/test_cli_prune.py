"""``sessionkeeper prune``: JSON shape, the TTL marker gate, OpenClaw equality, nothing written."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from tests._helpers import cli_output

from sessionkeeper.cli._prune import parse_now
from sessionkeeper.pruning import (
    PRUNE_RECORD_CUSTOM_TYPE,
    SoftTrimSettings,
    build_cache_ttl_entry,
    prune_record_data,
)
from sessionkeeper.transcript import (
    CustomEntry,
    ToolResultMessage,
    entry_to_builtins,
    load_transcript,
    message_from_json,
)


DATA = Path(__file__).resolve().parents[1] / "data"
LARGE = DATA / "pi" / "large-2000.jsonl"


def test_json_shape_and_file_untouched(tmp_path: Path) -> None:
    before = LARGE.read_bytes()
    code, out = cli_output(
        "prune", str(LARGE), "--context-window", "30000", "--ttl-expired", "--json", catch_exceptions=False
    )
    assert code == 0
    data = json.loads(out)
    assert list(data) == [
        "messages",
        "changed",
        "softTrimmed",
        "hardCleared",
        "reapplied",
        "charsBefore",
        "charsAfter",
        "skipped",
        "reason",
    ]
    assert data["changed"] is True and data["skipped"] is None
    assert data["charsAfter"] < data["charsBefore"]
    assert len(data["hardCleared"]) == 31 and data["softTrimmed"] == []
    context = json.loads((DATA / "pi" / "large-2000.context.json").read_text(encoding="utf-8"))["messages"]
    assert len(data["messages"]) == len(context)
    unchanged = [i for i, (a, b) in enumerate(zip(context, data["messages"], strict=True)) if a == b]
    assert len(unchanged) == len(context) - 31
    assert LARGE.read_bytes() == before


def test_cli_output_equals_openclaw_on_the_sample(tmp_path: Path) -> None:
    """The oracle case ``sample-large-2000-30000`` run through the CLI with the same settings."""
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({"agents": {"defaults": {"contextPruning": {"minPrunableToolChars": 0}}}}))
    code, out = cli_output(
        "prune",
        str(LARGE),
        "--context-window",
        "30000",
        "--ttl-expired",
        "--config",
        str(config),
        "--json",
        catch_exceptions=False,
    )
    assert code == 0
    ours = json.loads(out)["messages"]
    results = json.loads(gzip.decompress((DATA / "oracle" / "prune-results.json.gz").read_bytes()))
    expected = next(r for r in results if r["name"] == "sample-large-2000-30000")
    context = json.loads((DATA / "pi" / "large-2000.context.json").read_text(encoding="utf-8"))["messages"]
    changed = [i for i, (a, b) in enumerate(zip(context, ours, strict=True)) if a != b]
    assert changed == expected["changedIndexes"]
    for index in changed:
        assert message_from_json(ours[index]) == message_from_json(expected["changedMessages"][str(index)])


def _with_marker(tmp_path: Path, stamp: int) -> Path:
    index = load_transcript(LARGE)
    context = index.build_context()
    assert context.model is not None
    entry = build_cache_ttl_entry(
        entry_id="c0ffee00",
        parent_id=index.leaf_id,
        timestamp_ms=stamp,
        provider=context.model.provider,
        model_id=context.model.model_id,
    )
    copy = tmp_path / "marked.jsonl"
    copy.write_bytes(
        LARGE.read_bytes().rstrip(b"\n") + b"\n" + json.dumps(entry_to_builtins(entry)).encode() + b"\n"
    )
    return copy


def test_marker_and_now_decide_the_ttl_gate(tmp_path: Path) -> None:
    stamp = 1_800_000_000_000
    marked = _with_marker(tmp_path, stamp)
    code, out = cli_output(
        "prune",
        str(marked),
        "--context-window",
        "30000",
        "--now",
        str(stamp + 299_999),
        "--json",
        catch_exceptions=False,
    )
    assert code == 0 and json.loads(out)["skipped"] == "ttl-not-expired"
    code, out = cli_output(
        "prune",
        str(marked),
        "--context-window",
        "30000",
        "--now",
        str(stamp + 300_000),
        "--json",
        catch_exceptions=False,
    )
    assert json.loads(out)["changed"] is True
    code, out = cli_output(
        "prune", str(LARGE), "--context-window", "30000", "--json", catch_exceptions=False
    )  # no marker: expired (D11)
    assert json.loads(out)["skipped"] is None and json.loads(out)["changed"] is True


def test_text_output_and_errors(tmp_path: Path) -> None:
    code, out = cli_output(
        "prune", str(LARGE), "--context-window", "30000", "--ttl-expired", catch_exceptions=False
    )
    assert code == 0 and "changed: yes" in out and "hard-cleared: 31" in out
    assert (
        cli_output("prune", str(tmp_path / "missing.jsonl"), "--context-window", "5", catch_exceptions=False)[
            0
        ]
        == 2
    )
    assert cli_output("prune", str(LARGE), "--context-window", "0", catch_exceptions=False)[0] == 2
    assert (
        cli_output("prune", str(LARGE), "--context-window", "5", "--now", "soon", catch_exceptions=False)[0]
        == 2
    )
    assert (
        cli_output(
            "prune", str(LARGE), "--context-window", "5", "--leaf", "ffffffff", catch_exceptions=False
        )[0]
        == 1
    )


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1800000000000", 1_800_000_000_000),
        ("2026-01-01T00:00:00Z", 1_767_225_600_000),
        ("2026-01-01T01:00:00+01:00", 1_767_225_600_000),
        ("2026-01-01T00:00:00.250", 1_767_225_600_250),
    ],
)
def test_parse_now(text: str, ms: int) -> None:
    assert parse_now(text) == ms


def test_earlier_prunes_recorded_in_the_file_are_shown_re_applied(tmp_path: Path) -> None:
    """D11: the CLI sends what the runtime would, so a recorded prune is re-applied inside the TTL."""
    stamp = 1_800_000_000_000
    marked = _with_marker(tmp_path, stamp)
    index = load_transcript(marked)
    context = index.build_context()
    call_id = next(
        m.tool_call_id
        for m in context.messages
        if isinstance(m, ToolResultMessage) and sum(len(getattr(b, "text", "")) for b in m.content) > 200
    )
    record = CustomEntry(
        custom_type=PRUNE_RECORD_CUSTOM_TYPE,
        data=prune_record_data(
            timestamp_ms=stamp - 10,
            provider=None,
            model_id=None,
            soft_trimmed=[call_id],
            hard_cleared=[],
            soft_trim=SoftTrimSettings(max_chars=200, head_chars=50, tail_chars=50),
            placeholder="[Old tool result content cleared]",
        ),
        id="c0ffee01",
        parent_id=index.leaf_id,
        timestamp="2027-01-15T08:00:00.000Z",
    )
    with marked.open("ab") as handle:
        handle.write(json.dumps(entry_to_builtins(record)).encode() + b"\n")
    code, out = cli_output(
        "prune",
        str(marked),
        "--context-window",
        "30000",
        "--now",
        str(stamp + 1000),
        "--json",
        catch_exceptions=False,
    )
    payload = json.loads(out)
    assert code == 0 and payload["skipped"] == "ttl-not-expired"
    assert payload["reapplied"] == [call_id] and payload["changed"] is True
    sent = next(m for m in payload["messages"] if m.get("toolCallId") == call_id)
    assert "[Tool result trimmed: kept first 50 chars and last 50 chars" in sent["content"][0]["text"]
    code, text = cli_output(
        "prune", str(marked), "--context-window", "30000", "--now", str(stamp + 1000), catch_exceptions=False
    )
    assert f"re-applied (earlier prunes, D11): 1 {call_id}" in text
