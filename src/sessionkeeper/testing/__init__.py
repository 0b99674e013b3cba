"""
Test helpers for hosts of sessionkeeper (STYLE item 11): deterministic doubles for the seams.

- :class:`FakeClock`: settable wall and monotonic time; ``sleep`` advances instantly.
- :class:`ScriptedModelClient`: a :class:`~sessionkeeper.ModelClient` replaying a script or a handler,
  recording requests; :meth:`~ScriptedModelClient.next_turn` fakes the agent's main model with
  :class:`ScriptedTurn` replies (tool calls, usage, recorded errors) and scripted exceptions
  (:func:`context_overflow_error`).
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
from sessionkeeper.testing._model import (
    ModelHandler,
    ScriptedModelClient,
    ScriptedProviderError,
    ScriptedReply,
    ScriptedTurn,
    context_overflow_error,
)
from sessionkeeper.testing._tokens import FakeTokenCounter


__all__ = (
    "CapturedEvents",
    "FakeClock",
    "FakeTokenCounter",
    "InMemoryStoreBackend",
    "ModelHandler",
    "ScriptedModelClient",
    "ScriptedProviderError",
    "ScriptedReply",
    "ScriptedTurn",
    "capture_events",
    "context_overflow_error",
)


from sessionkeeper._public import set_public_module


set_public_module(globals())
