"""
``sessionkeeper prune FILE --context-window N [--ttl-expired] [--now ISO|MS] [--json]``.

Further options: ``--leaf ID`` (another leaf's context) and ``--config PATH`` (an ``openclaw.json``).

Shows what cache-TTL context pruning (OpenClaw spec §7) would send to the model for a transcript's
context. The transcript is only read, never written. The command assumes a cache-TTL-eligible provider
(DESIGN "CLI JSON" item 6); the TTL gate is decided by the transcript's newest ``openclaw.cache-ttl``
marker and ``--now``, or skipped with ``--ttl-expired``.

``--json`` prints ``{"messages": [...], "changed", "softTrimmed", "hardCleared", "charsBefore",
"charsAfter", "skipped", "reason"}``: ``messages`` is the pruned context in the ``context --json``
message shape (pi's camelCase records), the two id lists hold tool call ids, the char counts are
OpenClaw's weighted estimate, ``skipped`` names the gate that stopped pruning (``null`` when it ran), and
``reason`` says in one sentence why the context changed or not (also when the algorithm ran and found
nothing to trim: ``changed: false, skipped: null``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import click

from sessionkeeper._clock import SYSTEM_CLOCK
from sessionkeeper._config import load_config
from sessionkeeper.cli._file_args import TranscriptPath
from sessionkeeper.cli._json import json_text
from sessionkeeper.pruning import (
    Pruner,
    PruneResult,
    PruningSettings,
    read_last_cache_touch,
    read_prune_ledger,
)
from sessionkeeper.transcript import load_transcript, message_to_builtins


__all__ = ("COMMANDS", "parse_now", "prune_command", "prune_reason")


def parse_now(value: str) -> int:
    """
    Parse ``--now``: epoch milliseconds, or an ISO-8601 date-time (UTC when it has no offset).

    Raises:
        click.BadParameter: Neither form.
    """
    text = value.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither epoch ms nor an ISO date-time", param_hint="--now"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


_SKIP_REASONS: dict[str, str] = {
    "mode-off": "pruning is off (contextPruning.mode)",
    "provider-not-eligible": "the provider's prompt cache does not expire, so pruning would only cost cache",
    "ttl-disabled": "the cache TTL is 0 (contextPruning.ttl)",
    "ttl-not-expired": "the prompt cache TTL has not expired since the last cache-ttl marker (pass"
    " --ttl-expired, or --now with a later time)",
    "no-context-window": "no context window is known",
    "too-few-assistants": "fewer assistant messages than keepLastAssistants: every tool result is protected",
    "below-soft-trim-ratio": "the context is below softTrimRatio of the window: nothing needs pruning",
}


def prune_reason(result: PruneResult, settings: PruningSettings, *, context_window: int) -> str:
    """
    One sentence saying why ``result`` changed the context or not (``prune --json`` field ``reason``).

    Gates (``result.skipped``) get a fixed sentence; when the algorithm ran, the sentence quotes the
    ratio of the context to the window (weighted chars / (window tokens x 4)) against ``softTrimRatio``
    and ``hardClearRatio`` and the thresholds that left every tool result as it was.
    """
    ratio = result.chars_before / (context_window * 4)
    where = f"context at {ratio:.3f} of the window"
    if result.skipped is not None:
        sentence = _SKIP_REASONS.get(result.skipped, result.skipped)
        if result.skipped == "below-soft-trim-ratio":
            sentence += f" ({where} < softTrimRatio {settings.soft_trim_ratio})"
        return sentence
    if result.changed:
        done = (
            f"{where} >= softTrimRatio {settings.soft_trim_ratio}: {len(result.soft_trimmed)} tool results"
            f" soft-trimmed, {len(result.hard_cleared)} hard-cleared"
        )
        if result.hard_cleared:
            return done
        # Why hard clear did nothing: the setting that blocked it (the ratio it saw is the one after the
        # soft trims, which is chars_after when nothing was cleared).
        after = result.chars_after / (context_window * 4)
        after_trim = {
            "ratio": f"after soft trim at {after:.3f} < hardClearRatio {settings.hard_clear_ratio}",
            "disabled": "hard clear is disabled: hardClear.enabled",
            "size": f"at {after:.3f} >= hardClearRatio {settings.hard_clear_ratio} after soft trim, but the"
            f" prunable tool results weigh less than minPrunableToolChars {settings.min_prunable_tool_chars}"
            " chars, or clearing would not shrink them",
        }
        return f"{done} ({after_trim[_hard_clear_blocker(after, settings)]})"
    protected = f"older than the last {settings.keep_last_assistants} assistant messages"
    sentence = (
        f"{where} >= softTrimRatio {settings.soft_trim_ratio}, but no prunable tool result {protected} is"
        f" longer than softTrim.maxChars {settings.soft_trim.max_chars} (or trimming would not shrink it)"
    )
    untrimmed = {
        "ratio": f"hard clear starts at hardClearRatio {settings.hard_clear_ratio}",
        "disabled": "hard clear is disabled",
        "size": "hard clear needs prunable tool results of at least minPrunableToolChars"
        f" {settings.min_prunable_tool_chars} chars",
    }
    return f"{sentence}; {untrimmed[_hard_clear_blocker(ratio, settings)]}"


def _hard_clear_blocker(ratio: float, settings: PruningSettings) -> str:
    """
    What kept hard clear from running with the context at ``ratio`` of the window, in the pruner's order:
    ``"ratio"`` (below ``hardClearRatio``), ``"disabled"`` (``hardClear.enabled`` off), else ``"size"``
    (too few prunable chars, or clearing would not shrink them).
    """
    if ratio < settings.hard_clear_ratio:
        return "ratio"
    return "size" if settings.hard_clear.enabled else "disabled"


_EPILOG = """\b
Examples:
  sessionkeeper prune sessions/2f1c7b9e.jsonl --context-window 200000
  sessionkeeper prune sessions/2f1c7b9e.jsonl --context-window 200000 --ttl-expired --json
  sessionkeeper prune sessions/2f1c7b9e.jsonl --context-window 200000 --config ~/.openclaw/openclaw.json

\b
Nothing is written: this shows what the next request would send.
"""


@click.command("prune", epilog=_EPILOG)
@click.argument("file", type=TranscriptPath())
@click.option(
    "--context-window", type=click.IntRange(min=1), required=True, help="Model context window, tokens."
)
@click.option(
    "--ttl-expired", is_flag=True, help="Treat the prompt-cache TTL as expired (ignore the marker)."
)
@click.option("--now", "now", metavar="ISO|MS", help="Current time for the TTL gate (default: the clock).")
@click.option(
    "--leaf", "leaf", metavar="ID", help="Prune the context of this leaf (default: the file's leaf)."
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="openclaw.json whose agents.defaults.contextPruning settings to use (mode is forced to cache-ttl).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON result.")
def prune_command(
    *,
    file: Path,
    context_window: int,
    ttl_expired: bool,
    now: str | None,
    leaf: str | None,
    config_path: Path | None,
    as_json: bool,
) -> None:
    """Show the context of FILE after cache-TTL pruning (nothing is written)."""
    now_ms = parse_now(now) if now is not None else SYSTEM_CLOCK.now_ms()
    settings = attrs.evolve(PruningSettings.from_config(load_config(config_path)), mode="cache-ttl")
    index = load_transcript(file)
    leaf_id = leaf if leaf is not None else index.leaf_id
    if leaf is not None:
        index.require(leaf)
    # the default leaf as pi picks it (with no entry id, the last entry; None would be the empty context)
    context = index.build_context(leaf_id) if leaf is not None else index.build_context()
    provider = context.model.provider if context.model is not None else None
    model_id = context.model.model_id if context.model is not None else None
    if ttl_expired:
        touch: int | None = max(1, now_ms - max(settings.ttl_ms, 1))
    else:
        touch = read_last_cache_touch(index.branch(leaf_id), provider=provider, model_id=model_id)
    ledger = read_prune_ledger(index.entries())  # earlier prunes are re-applied, as the runtime does (D11)
    recorded = None if ttl_expired else ledger.touch_for(provider, model_id)
    if recorded is not None and (touch is None or recorded > touch):
        touch = recorded
    pruner = Pruner(settings=settings, is_cache_ttl_eligible=lambda p, m, a: True)
    result = pruner.prune(
        context.messages,
        context_window_tokens=context_window,
        last_cache_touch_at=touch,
        provider=provider,
        model_id=model_id,
        api="anthropic-messages",
        now_ms=now_ms,
        ledger=ledger,
    )
    if as_json:
        payload: dict[str, Any] = {
            "messages": [message_to_builtins(m) for m in result.messages],
            "changed": result.changed,
            "softTrimmed": list(result.soft_trimmed),
            "hardCleared": list(result.hard_cleared),
            "reapplied": list(result.reapplied),
            "charsBefore": result.chars_before,
            "charsAfter": result.chars_after,
            "skipped": result.skipped,
            "reason": prune_reason(result, settings, context_window=context_window),
        }
        click.echo(json_text(payload))
        return
    click.echo(f"messages: {len(result.messages)}")
    click.echo(
        f"changed: {'yes' if result.changed else 'no'}" + (f" ({result.skipped})" if result.skipped else "")
    )
    click.echo(f"reason: {prune_reason(result, settings, context_window=context_window)}")
    click.echo(f"soft-trimmed: {len(result.soft_trimmed)} {' '.join(result.soft_trimmed)}".rstrip())
    click.echo(f"hard-cleared: {len(result.hard_cleared)} {' '.join(result.hard_cleared)}".rstrip())
    if result.reapplied:
        click.echo(f"re-applied (earlier prunes, D11): {len(result.reapplied)} {' '.join(result.reapplied)}")
    click.echo(
        f"chars: {result.chars_before} -> {result.chars_after} "
        f"(window {context_window} tokens = {context_window * 4} chars)"
    )


COMMANDS: tuple[click.Command, ...] = (prune_command,)
