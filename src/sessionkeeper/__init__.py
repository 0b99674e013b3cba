"""
sessionkeeper: the session layer for LLM agent runtimes.

Which conversation this is (session key -> ``SessionEntry`` in a store), what was said (append-only
JSONL transcripts shaped as a tree of entries, file-compatible with pi 0.73.1), and how the history
keeps fitting the model's context window (compaction, pruning, memory flush, silent replies).

The main names are re-exported here; every subpackage (``sessionkeeper.transcript``,
``sessionkeeper.store``, ...) re-exports its own public names.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from sessionkeeper import exceptions as exceptions
from sessionkeeper._clock import SYSTEM_CLOCK as SYSTEM_CLOCK
from sessionkeeper._clock import Clock as Clock
from sessionkeeper._clock import SystemClock as SystemClock
from sessionkeeper.exceptions import SessionKeeperError as SessionKeeperError


try:
    __version__ = version("sessionkeeper")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = (
    "SYSTEM_CLOCK",
    "Clock",
    "SessionKeeperError",
    "SystemClock",
    "__version__",
    "exceptions",
)
