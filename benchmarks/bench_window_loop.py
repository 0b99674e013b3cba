"""
The small-window agent loop of issue #11: does every turn go through, and what do summaries cost?

Scenario (issue #11 "Sessions must never get stuck" / "Summaries must not waste model calls"): one
``SessionRuntime`` with ``ModelInfo(context_window=16_000)`` and default settings otherwise, 3 chat users
(session keys) x 60 turns, interleaved. Each turn is a user prompt, an assistant tool call, a tool result
of 2-20 KB and a final reply, through ``before_model_call`` / ``after_turn`` / ``on_model_error`` as the
README's loop makes them. The "provider" rejects a request whose estimated prompt exceeds the window
(an overflow error the runtime recovers from). The summariser is a scripted :class:`ModelClient` that
counts its calls and, like a real provider, rejects a request whose input plus ``max_tokens`` does not
fit the window.

Reported: turns failed (``ContextOverflowError`` or another error), compactions written, summariser calls
(and per compaction, target <= 3 on average), summariser requests rejected as overflows, the largest
``max_tokens`` asked, memory-flush calls. Timing is not the point (the counts are deterministic).

Run: ``python -m benchmarks window_loop [--users 3] [--turns 60] [--window 16000] [--json]``.

Measured with this script (seed 11), before and after D9/D10 (issue #11):

=========================================  ============  ===========  ====================  ==========
code                                       turns failed  compactions  calls per compaction  max_tokens
=========================================  ============  ===========  ====================  ==========
before, defaults                           164 / 180     0            -                     -
before, ``--keep-recent-tokens 1500``      0 / 180       58           16.0                  13107
after, defaults                            0 / 180       65           2.0                   2000
=========================================  ============  ===========  ====================  ==========
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import tempfile
from pathlib import Path
from typing import Any

import anyio
import attrs

from sessionkeeper import ModelRequest, ModelResponse, estimate_tokens
from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.exceptions import ContextOverflowError
from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from sessionkeeper.runtime import ModelInfo, RuntimeSettings, SessionRuntime
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import FakeClock


_SECTIONS = (  # safeguard's required headings (OpenClaw §5.6), as a model that follows the prompt writes
    "## Decisions",
    "## Open TODOs",
    "## Constraints/Rules",
    "## Pending user asks",
    "## Exact identifiers",
)
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
_USER_LINE = re.compile(r"^\[User\]: (.*)$", re.MULTILINE)


def _request_text(request: ModelRequest) -> str:
    parts = [request.system_prompt]
    for message in request.messages:
        content = getattr(message, "content", "")
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.extend(block.text for block in content if isinstance(block, TextContent))
    return "\n".join(parts)


@attrs.define
class SummariserModel:
    """
    The scripted model client: summaries (structured headings, the latest ask echoed) and memory flushes.

    A request whose input estimate (chars/4) plus ``max_tokens`` exceeds ``window`` is rejected with
    Anthropic's overflow error text, as a provider does.
    """

    window: int
    summary_calls: int = 0
    overflow_rejections: int = 0
    flush_calls: int = 0
    max_tokens_asked: int = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request (see the class docstring)."""
        purpose = request.metadata.get("purpose", "")
        text = _request_text(request)
        if purpose == "memory-flush":
            self.flush_calls += 1
            return ModelResponse(text="NO_REPLY")
        self.summary_calls += 1
        self.max_tokens_asked = max(self.max_tokens_asked, request.max_tokens)
        tokens = math.ceil(len(text) / 4)
        if tokens + request.max_tokens > self.window:
            self.overflow_rejections += 1
            raise RuntimeError(
                "input length and `max_tokens` exceed context limit: "
                f"{tokens} + {request.max_tokens} > {self.window}"
            )
        asks = _USER_LINE.findall(text)
        latest = asks[-1][:300] if asks else "the conversation"
        body = "\n".join(f"{heading}\n- {latest}" for heading in _SECTIONS)
        return ModelResponse(text=body, usage=Usage(input=tokens, output=len(body) // 4))


@attrs.frozen
class LoopReport:
    """What one run of the loop measured."""

    users: int
    turns_per_user: int
    window: int
    turns_failed: int
    compactions: int
    summary_calls: int
    overflow_rejections: int
    max_tokens_asked: int
    flush_calls: int
    failures: tuple[str, ...]

    @property
    def calls_per_compaction(self) -> float:
        """Summariser calls per compaction written (0 when none)."""
        return self.summary_calls / self.compactions if self.compactions else 0.0

    def to_json(self) -> dict[str, Any]:
        """camelCase JSON."""
        return {
            "users": self.users,
            "turnsPerUser": self.turns_per_user,
            "window": self.window,
            "turnsFailed": self.turns_failed,
            "compactions": self.compactions,
            "summaryCalls": self.summary_calls,
            "callsPerCompaction": round(self.calls_per_compaction, 2),
            "summaryOverflowRejections": self.overflow_rejections,
            "maxTokensAsked": self.max_tokens_asked,
            "flushCalls": self.flush_calls,
            "failures": list(self.failures[:5]),
        }


def _assistant(content: list[Any], *, stop: str, usage_input: int, now_ms: int) -> AssistantMessage:
    return AssistantMessage(
        content=content,
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(input=usage_input, output=60),
        stop_reason=stop,
        timestamp=now_ms,
    )


class _OverflowError(Exception):
    """The main model's 400 for a prompt over the window."""


def _check_fits(messages: tuple[AgentMessage, ...], window: int) -> int:
    tokens = sum(estimate_tokens(m) for m in messages)
    if tokens > window:
        raise _OverflowError(f"prompt is too long: {tokens} tokens > {window} maximum")
    return tokens


async def run_window_loop(
    *,
    users: int = 3,
    turns: int = 60,
    window: int = 16_000,
    seed: int = 11,
    keep_recent_tokens: int | None = None,
    directory: Path | None = None,
) -> LoopReport:
    """
    Run the loop once and count (see the module docstring).

    Args:
        users: Session keys, driven round-robin.
        turns: Turns per user.
        window: The model's context window, in tokens.
        seed: Seeds the tool-result sizes (2-20 KB) and the prompt words.
        keep_recent_tokens: Configured keep budget (``None``: the default, as a new user leaves it).
        directory: Where the JSON store and transcripts go (a temporary directory when ``None``).
    """
    rng = random.Random(seed)
    clock = FakeClock()
    model = SummariserModel(window=window)
    with tempfile.TemporaryDirectory() as scratch:
        root = directory if directory is not None else Path(scratch)
        store = SessionStore.open(root / "sessions", clock=clock, durable=False)
        runtime = SessionRuntime(
            store,
            model=ModelInfo(
                provider="anthropic",
                model_id="claude-sonnet-4-5",
                api="anthropic-messages",
                context_window=window,
            ),
            settings=RuntimeSettings(compaction=CompactionSettings(keep_recent_tokens=keep_recent_tokens)),
            model_client=model,
            clock=clock,
            cwd="/work",
        )
        keys = [f"agent:main:user{index}" for index in range(users)]
        failed = 0
        compactions = 0
        failures: list[str] = []

        async def call(session: Any, plan: Any) -> int:
            """The main model: an overflow goes through ``on_model_error`` until it fits or gives up."""
            nonlocal compactions
            while True:
                try:
                    return _check_fits(plan.messages, window)
                except _OverflowError as err:
                    recovery = await runtime.on_model_error(session, err)
                    if recovery.compaction is not None and recovery.compaction.compacted:
                        compactions += 1
                    plan = await runtime.before_model_call(session)

        def count(outcome: Any) -> None:
            nonlocal compactions
            if outcome is not None and outcome.compacted:
                compactions += 1

        for turn in range(turns):
            for user, key in enumerate(keys):
                clock.advance(1.0)
                now = clock.now_ms()
                words = " ".join(rng.choice(_WORDS) for _ in range(12))
                prompt = f"Please look at report {turn} for {words}"
                try:
                    session = await runtime.open(key, body=prompt)
                    plan = await runtime.before_model_call(session, prompt=prompt)
                    count(plan.compaction)
                    used = await call(session, plan)
                    call_id = f"call_{user}_{turn}"
                    size = rng.randint(2_000, 20_000)
                    result_text = (words + "\n") * (size // (len(words) + 1))
                    step = await runtime.after_turn(
                        session,
                        messages=[
                            _assistant(
                                [
                                    ToolCall(
                                        id=call_id, name="read", arguments={"path": f"reports/{turn}.txt"}
                                    )
                                ],
                                stop="toolUse",
                                usage_input=used,
                                now_ms=now,
                            ),
                            ToolResultMessage(
                                tool_call_id=call_id,
                                tool_name="read",
                                content=[TextContent(text=result_text)],
                                timestamp=now,
                            ),
                        ],
                        turn_complete=False,
                    )
                    count(step.compaction)
                    plan = await runtime.before_model_call(session)
                    count(plan.compaction)
                    used = await call(session, plan)
                    done = await runtime.after_turn(
                        session,
                        messages=[
                            _assistant(
                                [TextContent(text=f"Report {turn} covers {words}. " * 4)],
                                stop="stop",
                                usage_input=used,
                                now_ms=now,
                            )
                        ],
                    )
                    count(done.compaction)
                except ContextOverflowError as err:
                    failed += 1
                    failures.append(f"{key} turn {turn}: {err}")
    return LoopReport(
        users=users,
        turns_per_user=turns,
        window=window,
        turns_failed=failed,
        compactions=compactions,
        summary_calls=model.summary_calls,
        overflow_rejections=model.overflow_rejections,
        max_tokens_asked=model.max_tokens_asked,
        flush_calls=model.flush_calls,
        failures=tuple(failures),
    )


def main() -> int:
    """Command line entry (``python -m benchmarks window_loop``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1] if __doc__ else None)
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--keep-recent-tokens", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = anyio.run(
        lambda: run_window_loop(
            users=args.users,
            turns=args.turns,
            window=args.window,
            seed=args.seed,
            keep_recent_tokens=args.keep_recent_tokens,
        )
    )
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    total = report.users * report.turns_per_user
    print(
        f"window {report.window} tokens, {report.users} users x {report.turns_per_user} turns ({total} turns)"
    )
    print(f"turns failed:               {report.turns_failed} / {total}")
    print(f"compactions written:        {report.compactions}")
    print(f"summariser calls:           {report.summary_calls}")
    print(f"calls per compaction:       {report.calls_per_compaction:.2f} (target <= 3)")
    print(f"summariser overflow errors: {report.overflow_rejections}")
    print(f"largest max_tokens asked:   {report.max_tokens_asked}")
    print(f"memory-flush calls:         {report.flush_calls}")
    for line in report.failures[:3]:
        print(f"  e.g. {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
