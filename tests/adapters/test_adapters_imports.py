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
vendors = ("openai", "anthropic", "agents", "pydantic_ai")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in vendors)))
"""


def test_import_sessionkeeper_and_converters_imports_no_vendor_sdk() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


def test_each_client_module_imports_only_its_own_sdk() -> None:
    for module, sdk, other in (
        ("sessionkeeper.adapters.openai", "openai", "anthropic"),
        ("sessionkeeper.adapters.anthropic", "anthropic", "openai"),
        ("sessionkeeper.adapters.openai_agents", "agents", "anthropic"),
        ("sessionkeeper.adapters.pydantic_ai", "pydantic_ai", "anthropic"),
    ):
        probe = f"import importlib, json, sys; importlib.import_module({module!r}); " + (
            f"print(json.dumps([{sdk!r} in sys.modules, {other!r} in sys.modules]))"
        )
        proc = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == [True, False], module
