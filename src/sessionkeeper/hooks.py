"""
Hook events for plugin writers (pi-format spec §15.6; OpenClaw spec §5-6).

Register handlers with ``registry.on(EventClass, handler)`` on a :class:`HookRegistry`;
``session_before_compact`` handlers may return :class:`CompactHookResult` (cancel) or
:class:`CompactionHookOverride` (their own summary, written with ``fromHook: true``); their errors
propagate. Notification handlers (``session_compact``, ``compaction_end``, ...) cannot stop anything:
their errors are logged, passed to ``on_error`` and returned as :class:`HookError` (on
``CompactionResult.hook_errors`` for a compaction).
"""

from __future__ import annotations

from sessionkeeper._hooks import (
    BranchSummaryOverride,
    CompactHookResult,
    CompactionEndEvent,
    CompactionHookOverride,
    CompactionReason,
    CompactionStartEvent,
    ContextEvent,
    ContextHookResult,
    ForkHookResult,
    HookError,
    HookErrorHandler,
    HookEvent,
    HookHandler,
    HookRegistry,
    MemoryFlushEndEvent,
    MemoryFlushStartEvent,
    MessageEndEvent,
    MessageEndHookResult,
    SessionBeforeCompactEvent,
    SessionBeforeForkEvent,
    SessionBeforeSwitchEvent,
    SessionBeforeTreeEvent,
    SessionCompactEvent,
    SessionShutdownEvent,
    SessionStartEvent,
    SessionTreeEvent,
    SwitchHookResult,
    TreeHookResult,
    TreePreparation,
)


__all__ = (
    "BranchSummaryOverride",
    "CompactHookResult",
    "CompactionEndEvent",
    "CompactionHookOverride",
    "CompactionReason",
    "CompactionStartEvent",
    "ContextEvent",
    "ContextHookResult",
    "ForkHookResult",
    "HookError",
    "HookErrorHandler",
    "HookEvent",
    "HookHandler",
    "HookRegistry",
    "MemoryFlushEndEvent",
    "MemoryFlushStartEvent",
    "MessageEndEvent",
    "MessageEndHookResult",
    "SessionBeforeCompactEvent",
    "SessionBeforeForkEvent",
    "SessionBeforeSwitchEvent",
    "SessionBeforeTreeEvent",
    "SessionCompactEvent",
    "SessionShutdownEvent",
    "SessionStartEvent",
    "SessionTreeEvent",
    "SwitchHookResult",
    "TreeHookResult",
    "TreePreparation",
)
