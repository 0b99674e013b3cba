"""``examples/quickstart_openai.py`` runs the README quickstart loop against the local fixture server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.adapters._fixture_server import check_request, load_fixture, running_server


REPO = Path(__file__).resolve().parents[2]


def test_quickstart_example_runs_one_turn_and_writes_the_transcript(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    with running_server() as server:
        server.script(load_fixture("quickstart"))
        env = {**os.environ, "OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "sk-test"}
        env.pop("SESSIONKEEPER_EXAMPLE_MODEL", None)
        proc = subprocess.run(
            [sys.executable, str(REPO / "examples" / "quickstart_openai.py"), str(sessions)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        check_request(server, "quickstart")
    lines = proc.stdout.splitlines()
    assert lines[0] == "It exports add, sub and clamp."  # streamed
    assert lines[1] == "delivered: 'It exports add, sub and clamp.'"
    [transcript] = sessions.glob("*.jsonl")
    cli = subprocess.run(
        [sys.executable, "-m", "sessionkeeper", "context", str(transcript), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    messages = json.loads(cli.stdout)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    reply = messages[1]
    assert reply["content"] == [{"type": "text", "text": "It exports add, sub and clamp."}]
    assert (reply["api"], reply["provider"], reply["model"]) == ("openai-completions", "openai", "gpt-4o")
    assert reply["usage"]["input"] == 38 and reply["usage"]["output"] == 9
    assert reply["stopReason"] == "stop"
