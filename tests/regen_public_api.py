"""
Regenerate ``tests/data/public_api.txt``, the reviewed snapshot of the public API (``tests/_public_api.py``).

Run it after a deliberate change of a public name or signature, read the diff, and commit both:

    .venv/bin/python tests/regen_public_api.py
"""

from __future__ import annotations

import sys
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests._public_api import SNAPSHOT, render  # noqa: E402


if __name__ == "__main__":
    SNAPSHOT.write_text(render(), encoding="utf-8")
    print(f"wrote {SNAPSHOT.relative_to(REPO)}")
