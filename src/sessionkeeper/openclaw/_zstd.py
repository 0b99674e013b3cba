"""
zstd decompression for OpenClaw's compressed transcript rows: ``zstandard`` (the ``openclaw`` extra), else
the standard library's ``compression.zstd`` (Python 3.14+). Imported lazily: only zstd rows need it.
"""

from __future__ import annotations

import importlib
from typing import Any


__all__ = ("ZstdUnavailableError", "zstd_decompress")


class ZstdUnavailableError(RuntimeError):
    """Neither ``zstandard`` nor ``compression.zstd`` can be imported."""


def zstd_decompress(data: bytes, size: int) -> bytes:
    """
    Decompress one zstd frame holding at most ``size`` bytes.

    Raises:
        ZstdUnavailableError: No zstd implementation is installed (``pip install 'sessionkeeper[openclaw]'``).
        ValueError: ``data`` is not a valid zstd frame, or holds more than ``size`` bytes.
    """
    module: Any
    try:
        module = importlib.import_module("zstandard")
    except ImportError:
        try:
            module = importlib.import_module("compression.zstd")
        except ImportError:
            raise ZstdUnavailableError(
                "zstd-compressed rows need the 'zstandard' package: pip install 'sessionkeeper[openclaw]'"
            ) from None
        try:
            out = bytes(module.decompress(data))
        except module.ZstdError as err:
            raise ValueError(str(err)) from err
    else:
        try:
            # a bounded stream read: a hostile header's content size never sizes an allocation
            with module.ZstdDecompressor().stream_reader(data, read_across_frames=False) as reader:
                out = bytes(reader.read(size + 1))
        except module.ZstdError as err:
            raise ValueError(str(err)) from err
    if not out:
        raise ValueError("empty or truncated frame")
    if len(out) > size:
        raise ValueError(f"frame holds more than {size} bytes")
    return out
