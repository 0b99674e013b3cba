"""
The protocols a user implements to plug into sessionkeeper, in one public module (like ``anyio.abc``).

Each name here is the very object the library checks against and annotates with, so
``isinstance(x, sessionkeeper.abc.Clock)`` (every protocol here is ``runtime_checkable``) and static type
checking agree with what the library accepts:

- :class:`StoreBackend`: persistent ``session key -> SessionEntry`` storage under
  :class:`~sessionkeeper.store.SessionStore` (``sessions.json``, SQLite, memory, PostgreSQL, Redis ship).
- :class:`CompactionProvider`: a summariser registered by id (OpenClaw's ``registerCompactionProvider``).
- :class:`ModelClient`: the host's LLM as sessionkeeper calls it (one async ``complete(request)``).
- :class:`TokenCounter`: token counts of text and transcript messages (tiktoken and an estimator ship).
- :class:`Clock`: wall-clock (ms since epoch) and monotonic time (seconds), and a way to sleep.
- :class:`TranscriptStorage` and its :class:`WriterClaim`: where transcripts' lines live, by session id
  (pi JSONL files and memory ship; the contract is checked by ``sessionkeeper.testing.conformance``);
  :class:`CompactionClaimStorage`: a storage that also coordinates compactions across writers;
  :class:`ArchivingTranscriptStorage`: one that archives a reset or removed session's transcript.

Importing this module rewrites each protocol's ``__module__`` to ``"sessionkeeper.abc"`` so reprs, docs and
error messages show the public path.

.. versionadded:: 0.2
"""

from __future__ import annotations

from sessionkeeper._clock import Clock
from sessionkeeper._model_client import ModelClient
from sessionkeeper._tokens import TokenCounter
from sessionkeeper.compaction._providers import CompactionProvider
from sessionkeeper.store._backend import StoreBackend
from sessionkeeper.transcript._storage import (
    ArchivingTranscriptStorage,
    CompactionClaimStorage,
    TranscriptStorage,
    WriterClaim,
)


__all__ = (
    "ArchivingTranscriptStorage",
    "Clock",
    "CompactionClaimStorage",
    "CompactionProvider",
    "ModelClient",
    "StoreBackend",
    "TokenCounter",
    "TranscriptStorage",
    "WriterClaim",
)


def _fix_module_names() -> None:
    for name in __all__:
        globals()[name].__module__ = __name__


_fix_module_names()
