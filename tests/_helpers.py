"""
Builders the test files share: typed messages, pi-format transcript lines, the CLI runner, a ticking clock.

Imports only public names (``sessionkeeper.transcript``, ``sessionkeeper.cli``, ``sessionkeeper.testing``), so
moving a private module never touches the tests' helpers. Every default below is the value the test files
used before they shared these builders; a test that needs another value passes it.
"""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner, Result

from sessionkeeper.cli import cli
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)


TS = "2026-01-01T00:00:00.000Z"
"""The entry ``timestamp`` of the pi-format builders (ISO 8601, ms, ``Z``)."""


# -- typed messages (sessionkeeper.transcript records) ------------------------------------------------


def user(text: str | list[Any] = "hi", *, ts: int = 1, blocks: bool = False) -> UserMessage:
    """A user message; ``blocks=True`` wraps ``text`` in one :class:`TextContent` block."""
    return UserMessage(content=[TextContent(text=text)] if blocks else text, timestamp=ts)  # type: ignore[arg-type]


def assistant(
    *blocks: Any,
    api: str = "anthropic-messages",
    provider: str = "anthropic",
    model: str = "claude-sonnet-4-5",
    usage: Usage | None = None,
    stop: str = "stop",
    ts: int = 0,
) -> AssistantMessage:
    """An assistant reply; a ``str`` block becomes a :class:`TextContent`, other blocks are kept."""
    return AssistantMessage(
        content=[TextContent(text=b) if isinstance(b, str) else b for b in blocks],
        api=api,
        provider=provider,
        model=model,
        usage=usage if usage is not None else Usage(),
        stop_reason=stop,
        timestamp=ts,
    )


def tool_call(call_id: str, name: str = "read", arguments: dict[str, Any] | None = None) -> ToolCall:
    """A tool call block (arguments default to ``{"path": "f"}``)."""
    return ToolCall(id=call_id, name=name, arguments=arguments if arguments is not None else {"path": "f"})


def tool_result(call_id: str, text: str, name: str = "read", *, ts: int = 0) -> ToolResultMessage:
    """The text result of ``call_id``."""
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)], timestamp=ts
    )


# -- pi-format lines (JSON objects as other writers put them in a transcript) -------------------------


def header_obj(sid: str = "s", *, ts: str = TS, cwd: str = "/w", **extra: Any) -> dict[str, Any]:
    """A v3 session header object."""
    return {"type": "session", "version": 3, "id": sid, "timestamp": ts, "cwd": cwd, **extra}


def user_entry(
    eid: Any,
    parent: Any,
    text: str = "hi",
    *,
    ts: str = TS,
    stamp: Any = 1,
    blocks: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """A user message entry object; ids are written as given (numbers and booleans too)."""
    content: Any = [{"type": "text", "text": text}] if blocks else text
    message = {"role": "user", "content": content, "timestamp": stamp}
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts, "message": message, **extra}


def assistant_entry(
    eid: Any,
    parent: Any,
    text: str = "ok",
    *,
    ts: str = TS,
    stamp: Any = 2,
    api: str = "a",
    provider: str = "p",
    model: str = "m",
) -> dict[str, Any]:
    """An assistant message entry object with usage ``1 + 1`` tokens and zero cost."""
    usage: dict[str, Any] = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2}
    usage["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": api,
        "provider": provider,
        "model": model,
        "usage": usage,
        "stopReason": "stop",
        "timestamp": stamp,
    }
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": ts, "message": message}


def json_line(obj: Any, *, ensure_ascii: bool = True, end: bytes = b"") -> bytes:
    """``obj`` as one compact JSON line (UTF-8), followed by ``end`` (no newline by default)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=ensure_ascii).encode() + end


def jsonl(objs: list[Any], *, ensure_ascii: bool = True) -> bytes:
    """``objs`` as compact JSON lines, each ending in a newline."""
    return b"".join(json_line(obj, ensure_ascii=ensure_ascii, end=b"\n") for obj in objs)


# -- the CLI ---------------------------------------------------------------------------------------------


def run_cli(
    *args: str, env: dict[str, str | None] | None = None, catch_exceptions: bool = True, obj: Any = None
) -> Result:
    """Run ``sessionkeeper ARGS`` in-process (click's runner; ``result.output`` holds stderr too)."""
    return CliRunner(env=env).invoke(cli, list(args), catch_exceptions=catch_exceptions, obj=obj)


def cli_output(*args: str, catch_exceptions: bool = True, stdout: bool | None = None) -> tuple[int, str]:
    """
    The exit code and the output to read: by default stdout alone with ``--json`` (stderr has warnings),
    else stdout and stderr; ``stdout=True`` always reads stdout alone.
    """
    result = run_cli(*args, catch_exceptions=catch_exceptions)
    only_stdout = "--json" in args if stdout is None else stdout
    return result.exit_code, result.stdout if only_stdout else result.output


# -- clocks ----------------------------------------------------------------------------------------------


class TickingClock(FakeClock):
    """A :class:`~sessionkeeper.testing.FakeClock` that moves ``step_ms`` forward before every reading."""

    def __init__(self, now_ms: int, *, step_ms: int = 1000) -> None:
        super().__init__(now_ms=now_ms)
        self.step_ms = step_ms

    def now_ms(self) -> int:
        self.advance(ms=self.step_ms)
        return super().now_ms()
