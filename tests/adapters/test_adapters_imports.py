"""The core never imports a vendor SDK (DESIGN "LLM independence"): checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys


_PROBE = """
import json, sys
import sessionkeeper
for name in sessionkeeper.__all__:
    getattr(sessionkeeper, name)  # resolve every lazy re-export
import sessionkeeper.adapters
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("openai", "anthropic"))))
"""


def test_import_sessionkeeper_and_converters_imports_no_vendor_sdk() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
