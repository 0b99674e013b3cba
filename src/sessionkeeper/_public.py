"""
The public path of re-exported classes and functions: :func:`set_public_module`, for the packages above
the records (the one implementation is ``sessionkeeper.records._public``, at the bottom layer so the records
use it too; this is its path for the core and the packages, which import no other package's private module).
"""

from __future__ import annotations

from sessionkeeper.records import set_public_module


__all__ = ("set_public_module",)
