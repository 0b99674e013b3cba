"""``doctor CONFIG.json``: legacy keys, invalid values per settings class, --fix (0600 backup)."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from tests._helpers import run_cli

from sessionkeeper.cli._doctor import ConfigTarget, DoctorRegistry, Finding, default_registry, run_doctor
from sessionkeeper.cli._doctor_config import read_config_file


LEGACY = {
    "gateway": {"port": 18789},
    "session": {
        "dmScope": "per-peer",
        "idleMinutes": 120,
        "parentForkMaxTokens": 50_000,
        "maintenance": {"mode": "enforce", "rotateBytes": "10mb", "maxEntries": 300},
        "store": "~/.openclaw/agents/{agentId}/sessions/sessions.json",
    },
    "agents": {"defaults": {"compaction": {"reserveTokensFloor": 20000}}},
}


def _write(tmp_path: Path, tree: Any, name: str = "openclaw.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(tree, indent=4) + "\n")
    return path


def _doctor(*args: str) -> tuple[int, dict[str, Any]]:
    result = run_cli("doctor", *args, "--json")
    return result.exit_code, json.loads(result.stdout)


def test_config_files_are_recognised_by_content(tmp_path: Path) -> None:
    assert read_config_file(_write(tmp_path, LEGACY)) is not None
    pi = read_config_file(_write(tmp_path, {"compaction": {"enabled": True}}, "settings.json"))
    assert pi is not None and pi.kind == "pi"
    header = {
        "type": "session",
        "version": 3,
        "id": "s1",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/",
    }
    assert read_config_file(_write(tmp_path, header, "one-line.json")) is None  # a transcript header
    assert read_config_file(_write(tmp_path, {"name": "x"}, "package.json")) is None  # no known key
    assert read_config_file(_write(tmp_path, [1, 2], "list.json")) is None
    json5 = tmp_path / "commented.json"
    json5.write_text("{\n  // JSON5, as OpenClaw reads openclaw.json\n  session: {},\n}\n")
    target = read_config_file(json5)
    assert target is not None and target.tree == {"session": {}}
    broken = tmp_path / "broken.json"
    broken.write_text("{\n  session: {\n}\n")
    assert read_config_file(broken) is None  # not JSON5
    result = run_cli("doctor", str(tmp_path / "package.json"))
    assert result.exit_code == 2  # neither a transcript nor a config: bad input


def test_legacy_keys_are_reported_and_nothing_is_written(tmp_path: Path) -> None:
    path = _write(tmp_path, LEGACY)
    before = path.read_bytes()
    code, report = _doctor(str(path))
    assert code == 1
    (file,) = report["files"]
    assert (file["kind"], file["status"]) == ("config", "problems")
    found = {f["ids"][0]: f for f in file["findings"]}
    assert set(found) == {
        "session.maintenance.rotateBytes",
        "session.parentForkMaxTokens",
        "session.idleMinutes",
    }
    assert all(f["check"] == "legacy-config-keys" and f["fixable"] for f in found.values())
    assert "use session.reset.idleMinutes" in found["session.idleMinutes"]["message"]
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["openclaw.json"]


def test_fix_backs_up_and_rewrites_without_legacy_keys_keeping_order(tmp_path: Path) -> None:
    path = _write(tmp_path, LEGACY)
    before = path.read_bytes()
    code, report = _doctor(str(path), "--fix")
    assert code == 0
    (file,) = report["files"]
    assert file["status"] == "fixed" and file["findings"] == []
    assert len(file["fixed"]) == 3 and len(file["changes"]) == 3
    backup = Path(file["backupPath"])
    assert backup.name.startswith("openclaw.json.bak.")
    assert backup.read_bytes() == before
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    rewritten = json.loads(path.read_text())
    expected = {
        "gateway": {"port": 18789},
        "session": {
            "dmScope": "per-peer",
            "reset": {"mode": "idle", "idleMinutes": 120},
            "maintenance": {"mode": "enforce", "maxEntries": 300},
            "store": "~/.openclaw/agents/{agentId}/sessions/sessions.json",
        },
        "agents": {"defaults": {"compaction": {"reserveTokensFloor": 20000}}},
    }
    assert json.dumps(rewritten) == json.dumps(expected)  # same keys, same order
    # healthy now; a second --fix changes nothing and makes no second backup
    assert _doctor(str(path))[0] == 0
    code, again = _doctor(str(path), "--fix")
    assert code == 0 and again["files"][0]["status"] == "healthy" and again["files"][0]["backupPath"] is None
    assert len(list(tmp_path.glob("openclaw.json.bak.*"))) == 1


def test_idle_minutes_goes_into_an_existing_reset_block(tmp_path: Path) -> None:
    path = _write(tmp_path, {"session": {"reset": {"mode": "daily", "atHour": 5}, "idleMinutes": 90}})
    assert _doctor(str(path), "--fix")[0] == 0
    assert json.loads(path.read_text()) == {
        "session": {"reset": {"mode": "daily", "atHour": 5, "idleMinutes": 90}}
    }


def _at(dotted: str, value: Any) -> dict[str, Any]:
    """``_at("a.b", 1)`` -> ``{"a": {"b": 1}}``."""
    tree: Any = value
    for part in reversed(dotted.split(".")):
        tree = {part: tree}
    return tree


_DEFAULTS = "agents.defaults"


@pytest.mark.parametrize(
    ("key", "value", "settings_class"),
    [
        ("session.maintenance.pruneAfter", "soon", "MaintenanceSettings"),
        ("session.reset.mode", "weekly", "ResetPolicy"),
        ("session.writeLock", 5, "WriteLockSettings"),
        (f"{_DEFAULTS}.compaction.reserveTokens", "lots", "CompactionSettings"),
        (f"{_DEFAULTS}.contextPruning.ttl", "x", "PruningSettings"),
        (f"{_DEFAULTS}.compaction.memoryFlush.softThresholdTokens", "x", "MemoryFlushSettings"),
        (f"{_DEFAULTS}.compaction.overflowRecovery.maxCompactions", "x", "RuntimeSettings"),
        ("cron.sessionRetention", "forever-ish", "CronSettings"),
    ],
)
def test_invalid_values_name_their_key(tmp_path: Path, key: str, value: Any, settings_class: str) -> None:
    tree = _at(key, value)
    path = _write(tmp_path, tree)
    code, report = _doctor(str(path), "--fix")
    assert code == 1
    findings = report["files"][0]["findings"]
    assert findings, "an invalid value must be reported"
    assert all(f["check"] == "invalid-config-values" and not f["fixable"] for f in findings)
    assert any(
        f["ids"][0].startswith(key) and f["message"].endswith(f"({settings_class})") for f in findings
    ), findings
    assert report["files"][0]["backupPath"] is None  # nothing fixable: the file is not rewritten
    assert json.loads(path.read_text()) == tree


def test_pi_settings_keys_are_named_as_the_file_spells_them(tmp_path: Path) -> None:
    path = _write(
        tmp_path, {"compaction": {"enabled": True, "reserveTokens": -3}, "theme": "dark"}, "settings.json"
    )
    code, report = _doctor(str(path))
    assert code == 1
    (finding,) = report["files"][0]["findings"]
    assert finding["ids"] == ["compaction.reserveTokens"]
    assert finding["message"].startswith("compaction.reserveTokens: ")


def test_fix_with_invalid_values_still_drops_legacy_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, {"session": {"parentForkMaxTokens": 1, "reset": {"mode": "weekly"}}})
    code, report = _doctor(str(path), "--fix")
    assert code == 1
    file = report["files"][0]
    assert [f["ids"] for f in file["fixed"]] == [["session.parentForkMaxTokens"]]
    assert [f["ids"] for f in file["findings"]] == [["session.reset.mode"]]
    assert json.loads(path.read_text()) == {"session": {"reset": {"mode": "weekly"}}}


def test_healthy_config_and_text_output(tmp_path: Path) -> None:
    path = _write(tmp_path, {"session": {"reset": {"mode": "idle", "idleMinutes": 30}}, "agents": {}})
    result = run_cli("doctor", str(path))
    assert result.exit_code == 0
    assert "1 config file: 1 healthy" in result.output


@attrs.frozen
class _NoGateway:
    id: str = "no-gateway"
    description: str = "a config without a gateway block"

    def check_config(self, target: ConfigTarget) -> Iterable[Finding]:
        if "gateway" in target.tree:
            return ()
        return (Finding(check=self.id, severity="warning", message="no gateway block"),)


def test_config_checks_come_from_the_registry(tmp_path: Path) -> None:
    registry = default_registry()
    assert [c.id for c in registry.config_checks] == ["legacy-config-keys", "invalid-config-values"]
    registry.add(_NoGateway())
    with pytest.raises(ValueError, match="already registered"):
        registry.add(_NoGateway())
    path = _write(tmp_path, {"session": {}})
    run = anyio.run(lambda: run_doctor(path, registry=registry))
    assert [f.check for f in run.files[0].findings] == ["no-gateway"]
    assert run.exit_code == 1
    bare = anyio.run(lambda: run_doctor(path, registry=DoctorRegistry()))
    assert bare.files[0].kind == "config" and bare.exit_code == 0


_JSON5_LEGACY = """// gateway config, hand-edited
{
  gateway: { port: 18789 },  // keep this port
  session: {
    /* legacy: moved under session.reset by doctor --fix */
    idleMinutes: 120,
    maintenance: { mode: 'enforce', rotateBytes: '10mb', maxEntries: 300, },
  },
}
"""


def test_json5_config_is_checked_and_fix_says_comments_were_not_kept(tmp_path: Path) -> None:
    """Break-it #3: --fix on a JSON5 file backs it up (0600) and says its comments were not kept."""
    path = tmp_path / "openclaw.json"
    path.write_text(_JSON5_LEGACY)
    code, report = _doctor(str(path))
    assert code == 1
    assert {f["ids"][0] for f in report["files"][0]["findings"]} == {
        "session.idleMinutes",
        "session.maintenance.rotateBytes",
    }
    assert path.read_text() == _JSON5_LEGACY  # a check writes nothing
    code, report = _doctor(str(path), "--fix")
    assert code == 0
    (file,) = report["files"]
    assert file["status"] == "fixed"
    backup = Path(file["backupPath"])
    assert backup.read_text() == _JSON5_LEGACY  # the comments survive in the backup
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    (note,) = file["findings"]
    assert (note["check"], note["severity"]) == ("json5-formatting-dropped", "info")
    assert "comments" in note["message"] and backup.name in note["message"]
    assert note["message"] in file["changes"]
    assert json.loads(path.read_text()) == {
        "gateway": {"port": 18789},
        "session": {
            "reset": {"mode": "idle", "idleMinutes": 120},
            "maintenance": {"mode": "enforce", "maxEntries": 300},
        },
    }


def test_json5_note_shows_in_the_text_output(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text(_JSON5_LEGACY)
    result = run_cli("doctor", str(path), "--fix", env={"COLUMNS": "400"})
    assert result.exit_code == 0
    assert "comments and JSON5 formatting were not kept" in result.output
    assert "1 fixed" in result.output


def test_strict_json_fix_has_no_json5_note(tmp_path: Path) -> None:
    path = _write(tmp_path, LEGACY)
    _, report = _doctor(str(path), "--fix")
    assert all(f["check"] != "json5-formatting-dropped" for f in report["files"][0]["findings"])


def test_a_tree_strict_json_cannot_hold_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    text = "{session: {parentForkMaxTokens: 5, maintenance: {maxEntries: Infinity}}}"
    path.write_text(text)
    code, report = _doctor(str(path), "--fix")
    assert code == 1
    file = report["files"][0]
    assert file["backupPath"] is None and file["fixed"] == []
    assert any("strict JSON cannot write" in f["message"] for f in file["findings"])
    assert path.read_text() == text


def test_doctor_fix_writes_numbers_as_json_stringify_does(tmp_path: Path) -> None:
    # JSON5 and JSON exponent/fraction forms of whole numbers (1e3, 2000., 0x10 stays an int) were
    # rewritten as Python floats ("maxEntries": 1000.0); OpenClaw's doctor --fix writes JSON.stringify
    path = tmp_path / "openclaw.json"
    path.write_text(
        "// legacy\n{ session: { rotateBytesX: 1, parentForkMaxTokens: 1000,\n"
        "  maintenance: { maxEntries: 1e3, rotateBytes: '10mb' } },\n"
        "  agents: { defaults: { compaction: { reserveTokensFloor: 2000., keepRecentTokens: 0x10 } } },\n"
        "  x: [1.5, -0.0, 2.0, 1e21, 1e300] }\n"
    )
    result = run_cli("doctor", str(path), "--fix", "--json")
    assert result.exit_code == 0, result.output
    text = path.read_text()
    tree = json.loads(text)
    assert tree["session"]["maintenance"] == {"maxEntries": 1000}
    assert '"maxEntries": 1000\n' in text
    assert '"reserveTokensFloor": 2000,' in text
    assert '"keepRecentTokens": 16\n' in text
    assert "1.5,\n" in text
    assert "-0.0" not in text
    assert "2.0" not in text
    assert "1e+21" in text  # JSON.stringify(1e21) is 1e+21, not 21 digits
    assert "1e+300" in text
