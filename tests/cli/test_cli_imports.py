"""
Each command imports only what it runs (issue 11, "speed an operator feels"): checked on ``sys.modules`` of
a fresh interpreter, not timed (timings are in ``benchmarks/bench_cli.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from tests._helpers import run_cli

import sessionkeeper
from sessionkeeper.cli._main import _LAZY_COMMANDS, cli


# Heavy parts no start-up path needs: rich, the upper layers, the msgspec-based record modules, anyio,
# cattrs (the config tree), tiktoken, and importlib.metadata (tens of ms for a version string).
_HEAVY = (
    "rich",
    "sessionkeeper.compaction",
    "sessionkeeper.runtime",
    "sessionkeeper.pruning",
    "sessionkeeper.store",
    "sessionkeeper.transcript",
    "msgspec",
    "anyio",
    "cattrs",
    "tiktoken",
    "importlib.metadata",
)

_PROBE = """
import io, json, sys
from contextlib import redirect_stdout
sys.argv = ["sessionkeeper", *json.loads(sys.argv[1])]
out = io.StringIO()
with redirect_stdout(out):
    try:
        from sessionkeeper.cli import main
        main()
    except SystemExit as exit:
        code = exit.code
print(json.dumps({"out": out.getvalue(), "code": code, "modules": sorted(sys.modules)}))
"""


def _modules_after(*args: str) -> tuple[str, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["code"] in (0, None), report
    return report["out"], set(report["modules"])


def _loaded(modules: set[str], prefix: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for name in modules)


def test_version_imports_none_of_the_heavy_modules() -> None:
    out, modules = _modules_after("--version")
    assert out == f"sessionkeeper, version {sessionkeeper.__version__}\n"
    loaded = [name for name in _HEAVY if _loaded(modules, name)]
    # importlib.metadata here: no _build_version.py, an install older than the version from git tags
    # (`pip install -e .` again writes it)
    assert loaded == [], f"--version imported {loaded}"
    assert "logging" not in modules  # configured only when a command runs


def test_import_sessionkeeper_reads_no_package_metadata() -> None:
    code = "import json, sys, sessionkeeper; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    modules = set(json.loads(proc.stdout))
    assert not _loaded(modules, "importlib.metadata")
    assert not _loaded(modules, "sessionkeeper.transcript")


def test_version_is_the_installed_distribution_version() -> None:
    from importlib.metadata import version

    assert sessionkeeper.__version__ == version("sessionkeeper")


def test_context_json_imports_neither_rich_nor_the_upper_layers(pi_samples: Path) -> None:
    out, modules = _modules_after("context", str(pi_samples / "basic.jsonl"), "--json", "--llm")
    assert json.loads(out) == json.loads((pi_samples / "basic.context.json").read_text(encoding="utf-8"))
    upper = ("rich", "sessionkeeper.compaction", "sessionkeeper.runtime", "sessionkeeper.pruning")
    loaded = [name for name in (*upper, "sessionkeeper.store", "tiktoken") if _loaded(modules, name)]
    assert loaded == [], f"context --json imported {loaded}"


@pytest.mark.parametrize("name", sorted(_LAZY_COMMANDS))
def test_every_lazy_command_loads_and_is_listed(name: str) -> None:
    ctx = click.Context(cli)
    assert name in cli.list_commands(ctx)
    command = cli.get_command(ctx, name)
    assert isinstance(command, click.Command) and command.name == name


def test_help_lists_every_command() -> None:
    result = run_cli("--help")
    assert result.exit_code == 0
    commands = result.stdout.split("Commands:")[1].split("\n\n")[0]  # the epilog's examples follow
    listed = {line.split()[0] for line in commands.splitlines() if line.strip()}
    assert listed == set(_LAZY_COMMANDS)
