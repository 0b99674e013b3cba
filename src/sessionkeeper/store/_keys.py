"""
Session keys and transcript file names (OpenClaw spec §1.1, §4.1).

A *session key* names a conversation bucket (``agent:main:main``, ``agent:main:telegram:group:-100…``,
``cron:nightly``); it maps to the *session id* of the transcript that currently continues it. This module
builds every key shape OpenClaw builds, parses them back, classifies them the way maintenance and the
reset policy need (synthetic, protected, thread, group), and turns session ids into transcript file
names — refusing any id or thread id that could escape the sessions directory.

All functions are pure and never touch the file system.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.store._paths import encode_thread_id, normalize_agent_id


__all__ = (
    "DEFAULT_MAIN_KEY",
    "GLOBAL_SESSION_KEY",
    "DmScope",
    "ParsedSessionKey",
    "build_cron_run_session_key",
    "build_cron_session_key",
    "build_direct_session_key",
    "build_group_session_key",
    "build_heartbeat_session_key",
    "build_hook_session_key",
    "build_main_session_key",
    "build_model_run_session_key",
    "build_subagent_session_key",
    "build_thread_session_key",
    "build_topic_session_key",
    "is_acp_session_key",
    "is_cron_run_session_key",
    "is_cron_session_key",
    "is_external_group_session_key",
    "is_main_session_key",
    "is_model_run_session_key",
    "is_subagent_session_key",
    "is_synthetic_session_key",
    "is_telegram_topic_session_key",
    "normalize_main_key",
    "normalize_session_key",
    "parse_agent_session_key",
    "parse_cron_run_job_id",
    "parse_thread_suffix",
    "transcript_file_name",
    "validate_session_id",
)

DEFAULT_MAIN_KEY: Final = "main"
"""The main session's key suffix (``agent:<agentId>:main``)."""

GLOBAL_SESSION_KEY: Final = "global"
"""The single key used when ``session.scope`` is ``"global"``."""

DmScope = Literal["main", "per-peer", "per-channel-peer", "per-account-channel-peer"]
"""``session.dmScope``: how direct messages are bucketed (OpenClaw spec §4.1)."""

_SAFE_SESSION_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$", re.IGNORECASE)
_CHECKPOINT_NAME = re.compile(
    r"^(.+)\.checkpoint\.([0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})\.jsonl$",
    re.IGNORECASE,
)
_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_MODEL_RUN_KEY = re.compile(rf"^agent:([^:\s]+):explicit:model-run-{_UUID}$", re.IGNORECASE)
_MODEL_RUN_REST = re.compile(rf"^explicit:model-run-{_UUID}$")
_CRON_RUN_REST = re.compile(r"^cron:([^:]+):run:[^:]+(?::|$)")
_CRON_RUN_EXACT = re.compile(r"^cron:([^:]+):run:[^:]+$")
_TELEGRAM_TOPIC = re.compile(r"^telegram:(?:group|channel|direct|dm):.+:topic:[^:]+$")
_EXTERNAL_GROUP = re.compile(r"^[^:]+:(?:group|channel):.+$")
_PEER_KINDS: Final = frozenset({"group", "channel", "room"})
# (channel, peer kinds, span): peer ids of these channels keep their case (Signal groups, Matrix rooms).
_CASE_PRESERVING: Final = (("signal", ("group",), "segment"), ("matrix", ("channel", "group"), "tail"))


@attrs.frozen(kw_only=True)
class ParsedSessionKey:
    """
    An agent-scoped session key split into its parts.

    Attributes:
        agent_id: The agent id (``main`` in ``agent:main:…``).
        rest: Everything after ``agent:<agentId>:`` (``main``, ``telegram:group:-100…``,
            ``cron:nightly:run:…``).
    """

    agent_id: str
    rest: str


def normalize_main_key(value: str | None) -> str:
    """Lowercase a main key; empty means ``"main"`` (spec §4.1)."""
    return (value or "").strip().lower() or DEFAULT_MAIN_KEY


def _preserved_spans(raw: str) -> list[tuple[int, int, bool]]:
    spans: list[tuple[int, int, bool]] = []
    for channel, kinds, span in _CASE_PRESERVING:
        for kind in kinds:
            if span == "segment":
                spans.extend(
                    (m.start(2), m.end(2), True)
                    for m in re.finditer(rf"(^|:){channel}:{kind}:([^:]+)", raw, re.IGNORECASE)
                )
                continue
            scoped = re.match(rf"^(?:agent:[^:]*:)+:*{channel}:{kind}:", raw, re.IGNORECASE)
            unscoped = re.match(rf"^{channel}:{kind}:", raw, re.IGNORECASE)
            found = scoped or unscoped
            if not found or found.end() >= len(raw):
                continue
            start = found.end()
            marker = raw[start:].lower().rfind(":thread:")
            if marker == -1:
                spans.append((start, len(raw), False))
            else:
                spans.append((start, start + marker, False))
                if start + marker + 8 < len(raw):
                    spans.append((start + marker + 8, len(raw), False))
    return sorted((s for s in spans if s[1] > s[0]), key=lambda s: s[0])


def normalize_session_key(key: str | None) -> str:
    """
    Normalise a session key the way OpenClaw stores it (spec §4.1).

    Trimmed and lowercased, except the case-preserving peer ids: the Signal ``group`` segment and the
    Matrix ``channel``/``group`` tail up to ``:thread:`` (and the thread id after it).
    """
    raw = (key or "").strip()
    if not raw:
        return ""
    folded = raw.lower()
    if not any(f"{channel}:" in folded for channel, _, _ in _CASE_PRESERVING):
        return folded
    out: list[str] = []
    cursor = 0
    for start, end, trim in _preserved_spans(raw):
        if start < cursor:
            continue
        out.append(raw[cursor:start].lower())
        kept = raw[start:end]
        out.append(kept.strip() if trim else kept)
        cursor = end
    out.append(raw[cursor:].lower())
    return "".join(out)


def parse_agent_session_key(key: str | None) -> ParsedSessionKey | None:
    """
    Parse ``agent:<agentId>:<rest>`` (case-insensitive; spec §4.1).

    Returns:
        The parts, or ``None`` when ``key`` is not agent-scoped (``cron:x``, ``global``, ``hook:…``).
    """
    raw = normalize_session_key(key)
    parts = raw.split(":")
    if len(parts) < 3 or parts[0] != "agent" or not parts[1] or not parts[2]:
        return None
    agent_id = parts[1].strip()
    rest = ":".join(parts[2:])
    if not agent_id or not rest:
        return None
    return ParsedSessionKey(agent_id=agent_id, rest=rest)


def _rest(key: str) -> str:
    parsed = parse_agent_session_key(key)
    return (parsed.rest if parsed else key).strip().lower()


def build_main_session_key(agent_id: str | None = None, *, main_key: str | None = None) -> str:
    """``agent:<agentId>:<mainKey>``; the defaults give ``agent:main:main`` (spec §4.1)."""
    return f"agent:{normalize_agent_id(agent_id)}:{normalize_main_key(main_key)}"


def build_direct_session_key(
    agent_id: str | None = None,
    *,
    peer_id: str,
    channel: str | None = None,
    account_id: str | None = None,
    dm_scope: DmScope = "main",
    identity_links: Mapping[str, Any] | None = None,
    main_key: str | None = None,
) -> str:
    """
    The key of a direct-message conversation, per ``session.dmScope`` (spec §4.1).

    - ``main``: the main key (every DM shares the main session).
    - ``per-peer``: ``agent:<a>:direct:<peer>``.
    - ``per-channel-peer``: ``agent:<a>:<channel>:direct:<peer>``.
    - ``per-account-channel-peer``: ``agent:<a>:<channel>:<accountId>:direct:<peer>``.

    ``identity_links`` (``{canonical: [peer or "channel:peer", …]}``) maps a peer to a canonical name,
    except under ``main``. The peer id is lowercased; an empty peer gives the main key.
    """
    peer = peer_id.strip()
    if dm_scope != "main" and identity_links and peer:
        candidates = {peer.lower()}
        if channel and channel.strip():
            candidates.add(f"{channel.strip().lower()}:{peer}".lower())
        for canonical, ids in identity_links.items():
            linked = isinstance(ids, list) and any(
                isinstance(i, str) and i.strip().lower() in candidates for i in ids
            )
            if canonical.strip() and linked:
                peer = canonical.strip()
                break
    peer = peer.lower()
    agent = normalize_agent_id(agent_id)
    chan = (channel or "").strip().lower() or "unknown"
    if dm_scope == "per-account-channel-peer" and peer:
        account = (account_id or "").strip().lower() or "default"
        return f"agent:{agent}:{chan}:{account}:direct:{peer}"
    if dm_scope == "per-channel-peer" and peer:
        return f"agent:{agent}:{chan}:direct:{peer}"
    if dm_scope == "per-peer" and peer:
        return f"agent:{agent}:direct:{peer}"
    return build_main_session_key(agent, main_key=main_key)


def build_group_session_key(
    agent_id: str | None = None,
    *,
    channel: str,
    group_id: str,
    kind: Literal["group", "channel", "room"] = "group",
) -> str:
    """
    ``agent:<a>:<channel>:<kind>:<id>`` for a group chat, a channel or a room (spec §4.1).

    The id is lowercased, except Signal group ids and Matrix room ids, which are case-sensitive.

    Raises:
        ValueError: ``kind`` is not ``group``, ``channel`` or ``room``.
    """
    if kind not in _PEER_KINDS:
        raise ValueError(f"kind must be one of {sorted(_PEER_KINDS)}, got {kind!r}")
    chan = channel.strip().lower() or "unknown"
    peer = group_id.strip()
    preserve = any(chan == c and kind in kinds for c, kinds, _ in _CASE_PRESERVING)
    peer = (peer if preserve else peer.lower()) or "unknown"
    return f"agent:{normalize_agent_id(agent_id)}:{chan}:{kind}:{peer}"


def build_thread_session_key(base_key: str, thread_id: str | int) -> str:
    """``<base>:thread:<lowercased threadId>``; an empty thread id returns ``base_key`` (spec §4.1)."""
    thread = str(thread_id).strip()
    return f"{base_key}:thread:{thread.lower()}" if thread else base_key


def build_topic_session_key(base_key: str, topic_id: str | int) -> str:
    """``<base>:topic:<id>`` for a Telegram forum topic (spec §4.1)."""
    topic = str(topic_id).strip()
    if not topic:
        raise ValueError("topic id must not be empty")
    return f"{base_key}:topic:{topic}"


def build_cron_session_key(job_id: str, *, agent_id: str | None = None) -> str:
    """``cron:<jobId>``, or ``agent:<a>:cron:<jobId>`` when ``agent_id`` is given (spec §4.1)."""
    job = job_id.strip()
    if not job or ":" in job:
        raise ValueError(f"invalid cron job id {job_id!r}")
    return f"cron:{job}" if agent_id is None else f"agent:{normalize_agent_id(agent_id)}:cron:{job}"


def build_cron_run_session_key(agent_id: str | None, *, job_id: str, run_id: str) -> str:
    """``agent:<a>:cron:<jobId>:run:<runId>``: the session of one isolated cron run (spec §4.1)."""
    if not job_id.strip() or ":" in job_id or not run_id.strip() or ":" in run_id:
        raise ValueError(f"invalid cron job/run id {job_id!r}/{run_id!r}")
    return f"agent:{normalize_agent_id(agent_id)}:cron:{job_id.strip()}:run:{run_id.strip()}"


def build_hook_session_key(hook_id: str | None = None) -> str:
    """``hook:<uuid>`` for a webhook run; a fresh UUID when ``hook_id`` is omitted (spec §4.1)."""
    return f"hook:{hook_id or uuid.uuid4()}"


def build_subagent_session_key(agent_id: str | None, *, subagent_id: str) -> str:
    """``agent:<a>:subagent:<id>`` (spec §4.1)."""
    if not subagent_id.strip():
        raise ValueError("subagent id must not be empty")
    return f"agent:{normalize_agent_id(agent_id)}:subagent:{subagent_id.strip()}"


def build_heartbeat_session_key(base_key: str) -> str:
    """``<base>:heartbeat``: the isolated session of heartbeat runs (spec §4.1)."""
    return f"{base_key}:heartbeat"


def build_model_run_session_key(agent_id: str | None = None, *, run_id: uuid.UUID | str | None = None) -> str:
    """
    ``agent:<a>:explicit:model-run-<uuid>``: a one-shot gateway model-run probe (spec §2.3, §4.1).

    These keys get the fixed 24 h model-run retention in maintenance.
    """
    run = str(run_id or uuid.uuid4()).lower()
    if not re.fullmatch(_UUID, run):
        raise ValueError(f"model-run id must be a UUID, got {run_id!r}")
    return f"agent:{normalize_agent_id(agent_id)}:explicit:model-run-{run}"


def parse_thread_suffix(key: str) -> tuple[str, str | None]:
    """
    Split a key at its last ``:thread:`` marker (case-insensitive).

    Returns:
        ``(base key, thread id or None)``.
    """
    raw = key.strip()
    marker = raw.lower().rfind(":thread:")
    if marker == -1:
        return raw, None
    thread = raw[marker + 8 :].strip()
    return raw[:marker], thread or None


def is_main_session_key(key: str, *, main_key: str | None = None) -> bool:
    """True for ``agent:<anyAgent>:<mainKey>`` (the agent's primary session; DESIGN D6)."""
    parsed = parse_agent_session_key(key)
    return parsed is not None and parsed.rest == normalize_main_key(main_key)


def is_cron_session_key(key: str) -> bool:
    """True for agent-scoped cron keys ``agent:<a>:cron:…`` (jobs and runs)."""
    parsed = parse_agent_session_key(key)
    return parsed is not None and parsed.rest.lower().startswith("cron:")


def is_cron_run_session_key(key: str) -> bool:
    """True for ``agent:<a>:cron:<job>:run:<id>`` (optionally with a suffix)."""
    parsed = parse_agent_session_key(key)
    return parsed is not None and _CRON_RUN_REST.match(parsed.rest) is not None


def parse_cron_run_job_id(key: str) -> str | None:
    """The job id of an exact isolated cron-run key ``agent:<a>:cron:<job>:run:<id>``, else ``None``."""
    parsed = parse_agent_session_key(key)
    match = _CRON_RUN_EXACT.match(parsed.rest) if parsed else None
    return match.group(1) if match else None


def is_subagent_session_key(key: str) -> bool:
    """True for ``subagent:…`` and ``agent:<a>:subagent:…``."""
    return key.strip().lower().startswith("subagent:") or _rest(key).startswith("subagent:")


def is_acp_session_key(key: str) -> bool:
    """True for ``acp:…`` and ``agent:<a>:acp:…``."""
    return key.strip().lower().startswith("acp:") or _rest(key).startswith("acp:")


def is_model_run_session_key(key: str) -> bool:
    """
    True for a strict gateway model-run probe key ``agent:<a>:explicit:model-run-<uuid>`` (spec §2.3).

    The agent id must round-trip through the parser; other ``explicit:`` keys do not match.
    """
    match = _MODEL_RUN_KEY.match(key)
    if not match:
        return False
    parsed = parse_agent_session_key(key)
    if parsed is None or parsed.agent_id != match.group(1).lower():
        return False
    return _MODEL_RUN_REST.match(parsed.rest.lower()) is not None


def _synthetic_rest(parsed: ParsedSessionKey | None, rest: str) -> bool:
    return (
        rest.startswith(("subagent:", "acp:", "acp-bridge:", "hook:", "node:"))
        or (parsed is not None and rest.startswith("cron:"))
        or rest == "heartbeat"
        or rest.endswith(":heartbeat")
        or ":heartbeat:" in rest
    )


def is_synthetic_session_key(key: str) -> bool:
    """
    True for run-only keys maintenance may always remove (``isSyntheticSessionMaintenanceKey``, §2.3).

    Sub-agent, ACP and cron keys, and (after ``agent:<id>:``) ``acp-bridge:``, ``hook:``, ``node:``,
    exactly ``heartbeat``, ending ``:heartbeat`` or containing ``:heartbeat:``.
    """
    parsed = parse_agent_session_key(key)
    return _synthetic_rest(parsed, parsed.rest.strip().lower() if parsed else key.strip().lower())


def is_telegram_topic_session_key(key: str) -> bool:
    """True for ``[agent:<a>:]telegram:(group|channel|direct|dm):…:topic:<id>``."""
    return _TELEGRAM_TOPIC.match(_rest(key)) is not None


def is_external_group_session_key(key: str) -> bool:
    """True for ``[agent:<a>:]<channel>:(group|channel):…``: a durable external conversation pointer."""
    return _EXTERNAL_GROUP.match(_rest(key)) is not None


def is_protected_session_entry(key: str, entry: Mapping[str, Any] | None) -> bool:
    """
    ``isProtectedSessionMaintenanceEntry`` (spec §2.3): a durable external pointer maintenance keeps.

    Never for synthetic keys. Otherwise protected when the key has a ``:thread:`` suffix, is a Telegram
    topic, is ``<channel>:(group|channel):…``, or the entry's ``chatType`` (or ``origin.chatType``) is
    ``group``, ``channel`` or ``thread``.
    """
    parsed = parse_agent_session_key(key)
    rest = parsed.rest.strip().lower() if parsed else key.strip().lower()
    if _synthetic_rest(parsed, rest):
        return False
    if parse_thread_suffix(key)[1] is not None:
        return True
    if _TELEGRAM_TOPIC.match(rest) or _EXTERNAL_GROUP.match(rest):
        return True
    chat_type: Any = None
    if entry is not None:
        chat_type = entry.get("chatType")
        if chat_type is None:
            origin = entry.get("origin")
            chat_type = origin.get("chatType") if isinstance(origin, Mapping) else None
    return isinstance(chat_type, str) and chat_type.strip().lower() in {"group", "channel", "thread"}


def validate_session_id(session_id: str) -> str:
    """
    Check a session id can name a transcript file (``validateSessionId``, spec §1.1).

    Returns:
        The trimmed id.

    Raises:
        UnsafePathError: The id does not match ``^[a-z0-9][a-z0-9._-]{0,127}$`` (case-insensitive) or
            looks like a checkpoint file name.
    """
    trimmed = session_id.strip()
    if not _SAFE_SESSION_ID.match(trimmed) or _CHECKPOINT_NAME.match(f"{trimmed}.jsonl"):
        raise UnsafePathError(f"invalid session id {session_id!r}", value=session_id)
    return trimmed


def transcript_file_name(session_id: str, *, topic_id: str | int | None = None) -> str:
    """
    The transcript file name of a session (spec §1.1).

    ``<sessionId>.jsonl``, or ``<sessionId>-topic-<encodeURIComponent(topicId)>.jsonl`` for a Telegram
    topic thread. (Full paths: :func:`sessionkeeper.store.transcript_path`.)

    Raises:
        UnsafePathError: Invalid session id, or a topic id that cannot be encoded.
    """
    safe = validate_session_id(session_id)
    if topic_id is None:
        return f"{safe}.jsonl"
    return f"{safe}-topic-{encode_thread_id(topic_id)}.jsonl"
