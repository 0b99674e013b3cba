"""The package version, the one place it is written (``pyproject.toml`` reads it: hatch's version source).

A constant rather than ``importlib.metadata.version()``, which costs tens of milliseconds at import
(``sessionkeeper --version`` and ``import sessionkeeper`` stay cheap; issue 11).
"""

from __future__ import annotations


__all__ = ("__version__",)

__version__ = "0.1.0.dev0"
