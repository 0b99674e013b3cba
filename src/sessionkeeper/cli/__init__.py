"""
The ``sessionkeeper`` command line (click + rich). Thin: it calls the public API only.

Exit codes: 0 success, 1 error (an operation failed), 2 bad input or usage.
"""

from __future__ import annotations

from sessionkeeper.cli._main import cli, main


__all__ = ("cli", "main")
