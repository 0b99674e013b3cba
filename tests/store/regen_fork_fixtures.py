"""
Regenerate the parent-fork fixtures in tests/data/oracle (fork-cases.json, fork-results.json).

Runs ``tests/store/fork_oracle.mjs`` (OpenClaw 2026.7.35's own
``resolveParentForkTokenCountRuntime``, ``resolveParentForkDecision`` and
``forkSessionFromParentTranscript``, loaded from the installed oracle) on the crafted cases of
:func:`cases`. Usage::

    python tests/store/regen_fork_fixtures.py [--oracle /tmp/openclaw-oracle]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any


HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "tests" / "data" / "oracle"
SID = "11111111-1111-4111-8111-111111111111"
TS = "2026-09-01T00:00:01.000Z"


def _line(**record: Any) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def header() -> str:
    """A v3 header as pi writes it."""
    return _line(type="session", version=3, id=SID, timestamp="2026-09-01T00:00:00.000Z", cwd="/work")


def msg(entry_id: str, parent: str | None, role: str, text: str, usage: Any = None, **extra: Any) -> str:
    """A message entry; ``usage`` (assistant) defaults to all zeros."""
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}
    if role == "assistant":
        message.update(api="anthropic-messages", provider="anthropic", model="claude", stopReason="stop")
        zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
        message["usage"] = zero if usage is None else usage
    elif usage is not None:
        message["usage"] = usage
    return _line(type="message", id=entry_id, parentId=parent, timestamp=TS, message=message, **extra)


def usage(inp: int, out: int, read: int = 0, write: int = 0, **extra: Any) -> dict[str, Any]:
    """pi's usage object."""
    return {
        "input": inp,
        "output": out,
        "cacheRead": read,
        "cacheWrite": write,
        "totalTokens": inp + out + read + write,
        **extra,
    }


def label(entry_id: str, parent: str, target: str, text: str) -> str:
    """A label entry."""
    return _line(type="label", id=entry_id, parentId=parent, timestamp=TS, targetId=target, label=text)


def jsonl(*lines: str) -> str:
    """Lines joined as a transcript file."""
    return "\n".join(lines) + "\n"


def branchy(extra_usage: Any = None) -> str:
    """u1 -> a1 (usage) -> u2 -> b1 (off branch) ; u2 -> u3 (leaf)."""
    return jsonl(
        header(),
        msg("u1", None, "user", "hello"),
        msg("a1", "u1", "assistant", "hi", extra_usage if extra_usage is not None else usage(1000, 200)),
        msg("u2", "a1", "user", "next"),
        msg("b1", "u2", "assistant", "off-branch", usage(99_000, 99_000)),
        msg("u3", "u2", "user", "leaf " * 50),
    )


def cases() -> list[dict[str, Any]]:
    """``{name, entry, transcript}`` cases (transcript ``None``: no file)."""
    stale = {"sessionId": SID, "updatedAt": 1, "totalTokens": 10, "totalTokensFresh": False}
    context = usage(4000, 500, contextUsage={"state": "available", "promptTokens": 4000, "totalTokens": 4500})
    big_text = "x" * 300_000
    out: list[dict[str, Any]] = [
        {
            "name": "fresh total",
            "entry": {"sessionId": SID, "updatedAt": 1, "totalTokens": 5000},
            "transcript": branchy(),
        },
        {
            "name": "fresh zero",
            "entry": {"sessionId": SID, "updatedAt": 1, "totalTokens": 0, "totalTokensFresh": True},
            "transcript": branchy(),
        },
        {
            "name": "fresh over cap",
            "entry": {"sessionId": SID, "updatedAt": 1, "totalTokens": 100_001},
            "transcript": branchy(),
        },
        {"name": "stale, pi usage", "entry": stale, "transcript": branchy()},
        {
            "name": "stale, cached total wins",
            "entry": {**stale, "totalTokens": 90_000},
            "transcript": branchy(),
        },
        {"name": "context usage available", "entry": stale, "transcript": branchy(context)},
        {
            "name": "context usage unavailable",
            "entry": {**stale, "totalTokens": 300},
            "transcript": branchy(usage(50_000, 1, contextUsage={"state": "unavailable"})),
        },
        {
            "name": "zero usage reply",
            "entry": {**stale, "totalTokens": 50},
            "transcript": branchy(usage(0, 0)),
        },
        {
            "name": "cache tokens over cap",
            "entry": stale,
            "transcript": branchy(usage(100, 10, 70_000, 40_000)),
        },
        {
            "name": "openai style usage",
            "entry": stale,
            "transcript": branchy({"prompt_tokens": 3000, "cached_tokens": 1000, "completion_tokens": 50}),
        },
        {
            "name": "usage on the record",
            "entry": stale,
            "transcript": jsonl(
                header(),
                msg("u1", None, "user", "q"),
                _line(
                    type="message",
                    id="a1",
                    parentId="u1",
                    timestamp=TS,
                    message={
                        "role": "assistant",
                        "content": [],
                        "api": "x",
                        "provider": "p",
                        "model": "m",
                        "stopReason": "stop",
                    },
                    usage={"input_tokens": 777, "output_tokens": 3},
                ),
            ),
        },
        {
            "name": "user usage ignored",
            "entry": stale,
            "transcript": jsonl(header(), msg("u1", None, "user", "q", usage(90_000, 90_000))),
        },
        {
            "name": "no reply, huge file",
            "entry": stale,
            "transcript": jsonl(header(), msg("u1", None, "user", "y" * 500_000)),
        },
        {
            "name": "no reply, small file",
            "entry": stale,
            "transcript": jsonl(header(), msg("u1", None, "user", "small")),
        },
        {
            "name": "oversized reply line",
            "entry": stale,
            "transcript": jsonl(
                header(),
                msg("u1", None, "user", "q"),
                msg("a1", "u1", "assistant", big_text, usage(5, 5)),
                msg("u2", "a1", "user", "after"),
            ),
        },
        {"name": "no transcript, no totals", "entry": {"sessionId": SID, "updatedAt": 1}, "transcript": None},
        {
            "name": "no transcript, stale cached",
            "entry": {**stale, "totalTokens": 120_000},
            "transcript": None,
        },
        {
            "name": "labels on and off the branch",
            "entry": stale,
            "transcript": jsonl(
                header(),
                msg("u1", None, "user", "hello"),
                msg("a1", "u1", "assistant", "hi", usage(10, 2)),
                label("l1", "a1", "u1", "start"),
                msg("b1", "l1", "assistant", "off", usage(1, 1)),
                label("l2", "b1", "b1", "off-branch"),
                msg("u2", "l1", "user", "on"),
                label("l3", "u2", "a1", "answer"),
            ),
        },
    ]
    return out


def main() -> None:
    """Write the cases, run the oracle on them, write its results."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--oracle", default="/tmp/openclaw-oracle", help="installed openclaw-oracle copy")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    data = cases()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(data, handle)
    done = subprocess.run(
        ["node", str(HERE / "fork_oracle.mjs"), args.oracle, handle.name],
        capture_output=True,
        text=True,
        check=True,
    )
    Path(handle.name).unlink()
    (OUT / "fork-cases.json").write_text(json.dumps(data, indent=1) + "\n")
    (OUT / "fork-results.json").write_text(json.dumps(json.loads(done.stdout), indent=1) + "\n")
    print(f"wrote {len(data)} cases to {OUT}")


if __name__ == "__main__":
    main()
