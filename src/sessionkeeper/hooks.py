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

from sessionkeeper import _hook_events, _hooks
from sessionkeeper._hook_events import *  # noqa: F403 - the events module's __all__, re-exported
from sessionkeeper._hooks import *  # noqa: F403 - the registry module's __all__, re-exported


# Each name is listed once, in the private module that defines it; this module's surface is their union.
__all__: tuple[str, ...] = ()
__all__ += _hook_events.__all__
__all__ += _hooks.__all__


from sessionkeeper._public import set_public_module  # noqa: E402 - needs __all__ above


set_public_module(globals(), sources=("sessionkeeper._hook_events", "sessionkeeper._hooks"))
