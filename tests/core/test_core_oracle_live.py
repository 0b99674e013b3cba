"""
Opt-in (``--run-openclaw-live``): rerun OpenClaw 2026.7.35's own code and check that the committed
fixtures are still what it returns, and that our ports agree with it on random texts too. Needs node and
an installed oracle (``$OPENCLAW_ORACLE``, default ``/tmp/openclaw-oracle``).
"""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sessionkeeper._config import parse_byte_size, parse_duration_ms
from sessionkeeper.exceptions import ConfigError


HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data" / "oracle"

pytestmark = pytest.mark.oracle


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_sk_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def oracle(request: pytest.FixtureRequest) -> Path:
    if not request.config.getoption("--run-openclaw-live"):
        pytest.skip("live OpenClaw oracle runs are opt-in: --run-openclaw-live")
    path: Path = _load("regen_silent_fixture").oracle_dir()
    if shutil.which("node") is None or not (path / "node_modules" / "openclaw").is_dir():
        pytest.skip(f"node or the installed OpenClaw oracle ({path}) is absent")
    return path


def test_silent_fixture_matches_live_openclaw(oracle: Path) -> None:
    regen = _load("regen_silent_fixture")
    committed = json.loads((DATA / "silent.json").read_text(encoding="utf-8"))
    live = regen.run_oracle(regen.texts(), oracle)
    assert live["results"] == committed["results"]


def test_silent_ports_agree_on_random_texts(oracle: Path) -> None:
    regen = _load("regen_silent_fixture")
    ours = _load("test_core_silent")._ours
    atoms = [
        "NO_REPLY", "no_reply", "NO", "_", "REPLY", " ", "\n", "\r\n", "\u00a0", "\ufeff", "\x85", "*", ".",
        "…", "«", "`", "#", '"', "{", "}", "a", "The", "é", "😀", "<think>", "</think>", "thinking:",
        "I'll stay quiet.", "HEARTBEAT_OK", "<|channel|>", "───", '{"action":"NO_REPLY"}', "ſ", "K",
    ]  # fmt: skip
    rng = random.Random(20261130)
    texts = ["".join(rng.choice(atoms) for _ in range(rng.randint(0, 7))) for _ in range(1500)]
    live = regen.run_oracle(texts, oracle)
    mismatches: list[tuple[str, dict[str, Any]]] = []
    for case in live["results"]:
        expected = {key: value for key, value in case.items() if key != "text"}
        got = ours(case["text"])
        if got != expected:
            mismatches.append(
                (case["text"], {k: (expected[k], got[k]) for k in expected if expected[k] != got[k]})
            )
    assert mismatches == []


def test_config_parser_fixture_matches_live_openclaw(oracle: Path) -> None:
    regen = _load("regen_config_parsers_fixture")
    if not regen.node_binary(oracle).exists():
        pytest.skip("the oracle's Node 22 binary is absent")
    committed = json.loads((DATA / "config_parsers.json").read_text(encoding="utf-8"))
    cases = regen.all_cases()
    live = regen.run_oracle(cases, oracle)
    assert live == [row["result"] for row in committed["cases"]]
    for (kind, raw, unit), result in zip(cases, live, strict=True):
        parse = parse_duration_ms if kind == "duration" else parse_byte_size
        kwargs = {"default_unit": unit} if unit else {}
        try:
            ours: int | None = parse(raw, **kwargs)
        except ConfigError:
            ours = None
        assert ours == result, (kind, raw, unit)
