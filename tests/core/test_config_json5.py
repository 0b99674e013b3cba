"""
Config files are JSON5, as OpenClaw reads ``openclaw.json`` (break-it #3): comments, trailing commas,
unquoted keys, single quotes. Inputs: the json5 examples of OpenClaw's own docs (the seeds' compaction
block, the docs' full configuration example and its session-pruning block), copied to tests/data/config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import json5
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper._config import load_config, parse_config_text
from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.pruning import PruningSettings
from sessionkeeper.store import MaintenanceSettings


DATA = Path(__file__).resolve().parent.parent / "data" / "config"


def test_the_seeds_compaction_example_loads() -> None:
    # seeds/003 (OpenClaw's compaction docs): a ```json5 block with unquoted keys and trailing commas
    config = load_config(DATA / "seed-compaction.json5")
    settings = CompactionSettings.from_config(config)
    assert (settings.enabled, settings.reserve_tokens, settings.keep_recent_tokens) == (True, 16384, 20000)


def test_openclaws_full_configuration_example_loads() -> None:
    # docs/gateway/configuration-examples.md: comments (whole-line and trailing), unquoted keys, commas
    config = load_config(DATA / "openclaw-docs-full-example.json5")
    maintenance = MaintenanceSettings.from_config(config)
    assert maintenance.mode == "warn"
    assert maintenance.max_entries == 500
    assert maintenance.prune_after_ms == 30 * 86_400_000
    assert maintenance.max_disk_bytes == 500 * 1024**2
    assert maintenance.resolved_high_water_bytes == 400 * 1024**2
    assert config.get("session.resetTriggers") == ["/new", "/reset"]


def test_the_session_pruning_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    # docs/concepts/session-pruning.md
    path.write_text(
        '{\n  agents: {\n    defaults: {\n      contextPruning: { mode: "cache-ttl", ttl: "5m" },\n'
        "    },\n  },\n}\n",
        encoding="utf-8",
    )
    settings = PruningSettings.from_config(load_config(path))
    assert settings.mode == "cache-ttl"
    assert settings.ttl_ms == 5 * 60_000


def test_json5_syntax_gives_the_same_tree_as_strict_json(tmp_path: Path) -> None:
    strict = {
        "session": {"maintenance": {"pruneAfter": "7d", "maxEntries": 50}, "dmScope": "per-peer"},
        "agents": {"defaults": {"compaction": {"reserveTokens": 8000}}},
    }
    text = """// my gateway
{
  /* block comment */
  session: {
    maintenance: { pruneAfter: '7d', maxEntries: 50, },  // trailing comma, single quotes
    "dmScope": "per-peer",
  },
  agents: { defaults: { compaction: { reserveTokens: 8000 } } },
}
"""
    path = tmp_path / "openclaw.json"
    path.write_text(text, encoding="utf-8")
    assert load_config(path).tree == strict
    assert parse_config_text(text) == (strict, False)
    assert parse_config_text(json.dumps(strict)) == (strict, True)  # the strict-JSON fast path
    assert parse_config_text("\ufeff" + json.dumps(strict)) == (strict, True)  # a BOM is allowed


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("{\n  session: {\n    mode: @\n  }\n}\n", ":3:11:"),
        ("{\n  a: 1\n  b: 2\n}\n", ":3:3:"),  # missing comma
        ('{"session": ', ":1:13:"),
        ("", ":1:1:"),
    ],
)
def test_invalid_json5_names_file_line_and_column(tmp_path: Path, text: str, position: str) -> None:
    path = tmp_path / "broken.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid JSON5") as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}{position}")
    assert path.read_text(encoding="utf-8") == text  # never modified


def test_deep_nesting_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("{a:" * 5000 + "1" + "}" * 5000, encoding="utf-8")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(path)


def test_a_json5_root_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "list.json5"
    path.write_text("[1, 2, /* x */]", encoding="utf-8")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        load_config(path)


_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ_$0123456789 -", min_size=1, max_size=8)
# No NUL: json5.dumps writes "\x000" as "\00", which JSON5 forbids (\0 before a digit), so the text it
# writes would not read back, through no fault of the reader.
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.text(st.characters(exclude_characters="\x00"), max_size=12)
)
_trees = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(_keys, _trees, max_size=5))
def test_any_tree_written_as_json5_reads_back(tree: dict[str, Any]) -> None:
    as_json5 = json5.dumps(tree, quote_keys=False, trailing_commas=True, indent=2)
    assert parse_config_text(f"// header\n{as_json5}\n/* end */") == (tree, False)
    assert parse_config_text(json.dumps(tree)) == (tree, True)


def test_escaped_surrogate_pairs_are_one_character() -> None:
    # JSON5 (like JSON and JavaScript) reads "\ud83e\udd9e" as one character; the json5 package splits it
    text = '{emoji: "\\ud83e\\udd9e", "\\ud83e\\udd9e": 1, lone: "a\\ud800b", list: ["\\ud83d\\ude00"],}'
    tree, strict = parse_config_text(text)
    assert not strict
    assert tree == {"emoji": "🦞", "🦞": 1, "lone": "a\ud800b", "list": ["😀"]}
