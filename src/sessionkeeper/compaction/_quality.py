"""
Safeguard mode's summary quality audit (OpenClaw spec §5.6 step 6; field report B08).

A summary fails the audit when a required heading is missing, when (strict identifier policy) an
identifier seen in the last 10 summarised messages is missing, or when the latest user ask is not
reflected. A failed audit triggers one retry with feedback (``qualityGuard.maxRetries``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import attrs

from sessionkeeper.compaction._prompts import REQUIRED_SUMMARY_SECTIONS
from sessionkeeper.compaction._settings import IdentifierPolicy


__all__ = ("QualityAudit", "audit_summary", "extract_opaque_identifiers")

_MAX_IDENTIFIERS = 12
_MAX_ASK_TOKENS = 12
_MAX_TOKEN_CHARS = 2000  # identifiers never contain whitespace: scanning per token keeps the regex linear
_OPAQUE = re.compile(
    r"([A-Fa-f0-9]{8,}|https?://\S+|/[\w.-]{2,}(?:/[\w.-]+)+|[A-Za-z]:\\[\w\\.-]+"
    r"|[A-Za-z0-9._-]+\.[A-Za-z0-9._/-]+:\d{1,5}|\b\d{6,}\b)"
)
_PURE_HEX = re.compile(r"^[A-Fa-f0-9]{8,}$")
_STOPWORD_TEXT = (
    "a an and are as at be but by can could did do does for from had has have how i if in into "
    "is it its me my no not of on or our please so than that the their them then there these "
    "they this to up us was we were what when where which who why will with would you your yes "
    "ok okay now just also let lets can't don't"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def _sanitize(value: str) -> str:
    return re.sub(r"[)\]\"'`,;:.!?<>]+$", "", re.sub(r"^[(\"'`\[{<]+", "", value.strip()))


def extract_opaque_identifiers(text: str) -> list[str]:
    """
    Identifiers the audit requires verbatim (OpenClaw's ``extractOpaqueIdentifiers``).

    Hex runs of 8+ (upper-cased, compared case-insensitively), URLs, absolute POSIX and Windows
    paths, ``host:port`` and numbers of 6+ digits; at least 4 chars; at most 12, first seen first.
    Whitespace-separated tokens longer than 2000 chars are skipped (no identifier is that long).
    """
    seen: dict[str, None] = {}
    matches = (m for token in text.split() if len(token) <= _MAX_TOKEN_CHARS for m in _OPAQUE.finditer(token))
    for match in matches:
        value = _sanitize(match.group(0))
        if _PURE_HEX.match(value):
            value = value.upper()
        if len(value) >= 4 and value not in seen:
            seen[value] = None
    return list(seen)[:_MAX_IDENTIFIERS]


def _includes(summary: str, identifier: str) -> bool:
    if _PURE_HEX.match(identifier):
        return identifier.upper() in summary.upper()
    return identifier in summary


def _tokens(text: str) -> list[str]:
    normalized = unicodedata.normalize("NFKC", text).lower().strip()
    return [token for token in re.split(r"[^\w]+", normalized) if token and token != "_"]


def _ask_reflected(summary: str, latest_ask: str | None) -> bool:
    if not latest_ask:
        return True
    ask_tokens = list(dict.fromkeys(_tokens(latest_ask)))[:_MAX_ASK_TOKENS]
    if not ask_tokens:
        return True
    meaningful = [token for token in ask_tokens if len(token) > 1 and token not in _STOPWORDS]
    check = meaningful or ask_tokens
    summary_tokens = set(_tokens(summary))
    overlap = sum(1 for token in check if token in summary_tokens)
    return overlap >= (2 if len(check) >= 3 else 1)


@attrs.frozen(kw_only=True)
class QualityAudit:
    """
    Result of :func:`audit_summary`.

    Attributes:
        ok: Whether the summary passed.
        reasons: ``missing_section:<heading>``, ``missing_identifiers:<up to 3>``,
            ``latest_user_ask_not_reflected``.
    """

    ok: bool
    reasons: tuple[str, ...]


def audit_summary(
    summary: str,
    *,
    identifiers: Sequence[str],
    latest_ask: str | None,
    identifier_policy: IdentifierPolicy = "strict",
) -> QualityAudit:
    """
    Audit a safeguard summary (OpenClaw spec §5.6 step 6).

    Args:
        summary: The summary body (without the preserved-turns suffix).
        identifiers: From :func:`extract_opaque_identifiers` over the last 10 summarised messages.
        latest_ask: Text of the latest user message summarised, if any.
        identifier_policy: Identifiers are checked only under ``"strict"``.

    Returns:
        The :class:`QualityAudit`.
    """
    reasons: list[str] = []
    lines = {line.strip() for line in summary.splitlines() if line.strip()}
    reasons.extend(
        f"missing_section:{heading}" for heading in REQUIRED_SUMMARY_SECTIONS if heading not in lines
    )
    if identifier_policy == "strict":
        missing = [identifier for identifier in identifiers if not _includes(summary, identifier)]
        if missing:
            reasons.append("missing_identifiers:" + ",".join(missing[:3]))
    if not _ask_reflected(summary, latest_ask):
        reasons.append("latest_user_ask_not_reflected")
    return QualityAudit(ok=not reasons, reasons=tuple(reasons))
