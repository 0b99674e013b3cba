"""
:class:`RuntimeParts`: what the runtime's steps (flush, compaction, pruning, transcripts) read of the
:class:`~sessionkeeper.runtime.SessionRuntime` that runs them.

The steps read these at call time, not at construction, so a host that replaces ``runtime.model`` (or
another public attribute) between turns is followed by every step, as by the runtime itself.
"""

from __future__ import annotations

from typing import Protocol

from sessionkeeper._clock import Clock
from sessionkeeper._model_client import ModelClient
from sessionkeeper._tokens import TokenCounter
from sessionkeeper.compaction import CompactionProviderRegistry
from sessionkeeper.hooks import HookRegistry
from sessionkeeper.pruning import Pruner
from sessionkeeper.runtime._runtime_types import ModelInfo, RuntimeSettings
from sessionkeeper.store import SessionStore


__all__ = ("RuntimeParts",)


class RuntimeParts(Protocol):
    """The runtime's collaborators and sizes, as the steps see them (``SessionRuntime`` is one)."""

    @property
    def store(self) -> SessionStore:
        """The session store."""
        ...

    @property
    def model(self) -> ModelInfo:
        """The model about to be called."""
        ...

    @property
    def settings(self) -> RuntimeSettings:
        """All settings."""
        ...

    @property
    def model_client(self) -> ModelClient | None:
        """The host's model, if any."""
        ...

    @property
    def providers(self) -> CompactionProviderRegistry | None:
        """Registered compaction providers."""
        ...

    @property
    def hooks(self) -> HookRegistry:
        """The hook registry."""
        ...

    @property
    def clock(self) -> Clock:
        """Time source."""
        ...

    @property
    def cwd(self) -> str:
        """The ``cwd`` of new transcript headers."""
        ...

    @property
    def pruner(self) -> Pruner:
        """The request pruner."""
        ...

    @property
    def token_counter(self) -> TokenCounter:
        """Counts the tokens of the messages the runtime sizes itself."""
        ...

    @property
    def context_window(self) -> int:
        """The resolved window, in tokens."""
        ...

    @property
    def compaction_threshold(self) -> int:
        """``window - effectiveReserve``, in tokens."""
        ...
