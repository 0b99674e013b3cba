"""
Test helpers for hosts of sessionkeeper (STYLE item 11): deterministic doubles for the seams.

- :class:`FakeClock`: settable wall and monotonic time; ``sleep`` advances instantly.
- :class:`ScriptedModelClient`: a :class:`~sessionkeeper.ModelClient` replaying a script or a handler,
  recording requests.
- :func:`capture_events`: record what a :class:`~sessionkeeper.HookRegistry` emits.
- :class:`FakeTokenCounter`: predictable token counts without tiktoken.
- :class:`InMemoryStoreBackend` (from :mod:`sessionkeeper.store`): a session store that never touches
  disk, with the same semantics as the file backends; ``TranscriptManager.in_memory()`` is its
  transcript counterpart.

The store backend conformance suite lives in :mod:`sessionkeeper.testing.conformance`.
"""

from __future__ import annotations

from sessionkeeper.store import InMemoryStoreBackend
from sessionkeeper.testing._clock import FakeClock
from sessionkeeper.testing._events import CapturedEvents, capture_events
from sessionkeeper.testing._model import ModelHandler, ScriptedModelClient, ScriptedReply
from sessionkeeper.testing._tokens import FakeTokenCounter


__all__ = (
    "CapturedEvents",
    "FakeClock",
    "FakeTokenCounter",
    "InMemoryStoreBackend",
    "ModelHandler",
    "ScriptedModelClient",
    "ScriptedReply",
    "capture_events",
)


def _fix_module_names() -> None:
    for name in ("CapturedEvents", "FakeClock", "FakeTokenCounter", "ScriptedModelClient", "capture_events"):
        globals()[name].__module__ = __name__


_fix_module_names()
