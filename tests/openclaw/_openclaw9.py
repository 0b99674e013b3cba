"""The committed OpenClaw 2026.9 fixtures (``tests/data/openclaw9/``, see ``regen_openclaw9_fixtures.py``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


DATA = Path(__file__).resolve().parents[1] / "data" / "openclaw9"
SAMPLES: list[str] = [item["name"] for item in json.loads((DATA / "index.json").read_text())]


def sample_db(name: str, directory: Path) -> Path:
    """The sample agent database ``name`` (written by OpenClaw 2026.9.6) unpacked into ``directory``."""
    target = directory / f"{name}.sqlite"
    target.write_bytes(gzip.decompress((DATA / f"{name}.sqlite.gz").read_bytes()))
    return target


def files(directory: Path) -> dict[str, bytes]:
    """Every file of a sessions directory by name, with its bytes."""
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}
