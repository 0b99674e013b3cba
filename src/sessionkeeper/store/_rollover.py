"""
What a session rollover changes on the entry (OpenClaw ``resetSessionEntryLifecycle`` and
``initSessionState`` step 7, spec §1.5, §4.3): the cleared per-session fields and the new session's
counters, and the replayable id factory a decision that may run twice draws from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from msgspec import UNSET


__all__ = ("RESET_CLEARED_FIELDS", "ReplayedIds", "rollover_patch")

RESET_CLEARED_FIELDS: tuple[str, ...] = (
    "inputTokens",
    "outputTokens",
    "cacheRead",
    "cacheWrite",
    "estimatedCostUsd",
    "contextTokens",
    "contextBudgetStatus",
    "model",
    "modelProvider",
    "fallbackNoticeSelectedModel",
    "fallbackNoticeActiveModel",
    "fallbackNoticeReason",
    "systemPromptReport",
    "goal",
    "skillsSnapshot",
    "memoryFlushAt",
    "memoryFlushCompactionCount",
    "memoryFlushContextHash",
    "memoryFlushFailureCount",
    "memoryFlushLastFailedAt",
    "memoryFlushLastFailureError",
    "status",
    "startedAt",
    "endedAt",
    "runtimeMs",
    "abortedLastRun",
    "abortCutoffMessageSid",
    "abortCutoffTimestamp",
    "compactionCheckpoints",
)
"""
Per-session fields :meth:`~sessionkeeper.store.SessionStore.reset` removes (OpenClaw ``initSessionState``
step 7, §4.3).
"""


def rollover_patch(new_id: str, now_ms: int) -> dict[str, Any]:
    """
    The patch (wire names; ``UNSET`` removes a field) that starts session ``new_id`` at ``now_ms`` (ms
    since epoch) on an entry: :data:`RESET_CLEARED_FIELDS` removed; ``sessionId``, ``updatedAt``,
    ``sessionStartedAt`` and ``lastInteractionAt`` set; ``compactionCount`` and ``totalTokens`` 0 with
    ``totalTokensFresh``.
    """
    patch: dict[str, Any] = dict.fromkeys(RESET_CLEARED_FIELDS, UNSET)
    patch.update(
        sessionId=new_id,
        updatedAt=now_ms,
        sessionStartedAt=now_ms,
        lastInteractionAt=now_ms,
        compactionCount=0,
        totalTokens=0,
        totalTokensFresh=True,
    )
    return patch


class ReplayedIds:
    """
    A session id factory whose draws repeat after :meth:`restart`: a decision that runs more than once
    (:meth:`~sessionkeeper.store.SessionStore.resolve`'s pre-check, a database retry) names the same ids,
    and the store's factory is called exactly as often as one run needs.
    """

    def __init__(self, factory: Callable[[], str]) -> None:
        self._factory = factory
        self._drawn: list[str] = []
        self._next = 0

    def restart(self) -> None:
        """Replay the ids from the first one."""
        self._next = 0

    def __call__(self) -> str:
        if self._next == len(self._drawn):
            self._drawn.append(self._factory())
        value = self._drawn[self._next]
        self._next += 1
        return value
