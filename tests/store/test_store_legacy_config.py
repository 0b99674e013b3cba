"""Legacy config keys (rotateBytes, parentForkMaxTokens, session.idleMinutes): warnings and the rewrite."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper._config import load_config
from sessionkeeper.store import MaintenanceSettings, ResetPolicy
from sessionkeeper.store._legacy_config import LEGACY_CONFIG_KEYS, find_legacy_keys, migrate_legacy_config


def test_each_legacy_key_warns_naming_itself_and_its_replacement() -> None:
    with pytest.warns(
        DeprecationWarning, match=r"'session\.idleMinutes' is deprecated; use session\.reset\.idleMinutes"
    ):
        policy = ResetPolicy.from_config(load_config({"session": {"idleMinutes": 45}}))
    assert policy.resolve("direct").idle_minutes == 45  # still honoured, as OpenClaw does
    with pytest.warns(
        DeprecationWarning, match=r"'session\.parentForkMaxTokens' was removed .*no replacement"
    ):
        ResetPolicy.from_config(load_config({"session": {"parentForkMaxTokens": 0}}))
    with pytest.warns(DeprecationWarning, match=r"'session\.maintenance\.rotateBytes' .*no replacement"):
        settings = MaintenanceSettings.from_config(
            load_config({"session": {"maintenance": {"rotateBytes": "10mb"}}})
        )
    assert settings == MaintenanceSettings()  # ignored


def test_current_keys_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ResetPolicy.from_mapping({"reset": {"mode": "idle", "idleMinutes": 45}})
        MaintenanceSettings.from_mapping({"pruneAfter": "7d"})


def test_an_empty_reset_by_type_block_is_explicit_as_in_openclaw() -> None:
    """JS ``Boolean({})`` is true: with any resetByType block the legacy key no longer means idle mode."""
    with pytest.warns(DeprecationWarning):
        policy = ResetPolicy.from_mapping({"idleMinutes": 30, "resetByType": {}})
    assert (policy.resolve("direct").mode, policy.resolve("direct").idle_minutes) == ("daily", 30)


def test_find_legacy_keys() -> None:
    tree = {"session": {"idleMinutes": 5, "parentForkMaxTokens": 1, "maintenance": {"rotateBytes": 1}}}
    assert [k.key for k in find_legacy_keys(tree)] == [k.key for k in LEGACY_CONFIG_KEYS]
    assert find_legacy_keys({"session": {"reset": {"idleMinutes": 5}}, "agents": {}}) == []
    assert find_legacy_keys({"session": "bad"}) == []


def test_migration_keeps_other_keys_and_their_order() -> None:
    tree = {
        "gateway": {"port": 1},
        "session": {
            "dmScope": "main",
            "idleMinutes": 30,
            "parentForkMaxTokens": 50_000,
            "maintenance": {"mode": "warn", "rotateBytes": "10mb", "maxEntries": 9},
            "store": "~/x",
        },
        "agents": {"defaults": {}},
    }
    new, changes = migrate_legacy_config(tree)
    assert json.dumps(new) == json.dumps(
        {
            "gateway": {"port": 1},
            "session": {
                "dmScope": "main",
                "reset": {"mode": "idle", "idleMinutes": 30},
                "maintenance": {"mode": "warn", "maxEntries": 9},
                "store": "~/x",
            },
            "agents": {"defaults": {}},
        }
    )
    assert len(changes) == 3
    assert tree["session"]["idleMinutes"] == 30  # input untouched
    assert migrate_legacy_config(new) == (new, ())


@pytest.mark.parametrize(
    ("session", "expected"),
    [
        ({"reset": {"atHour": 5}, "idleMinutes": 10}, {"reset": {"atHour": 5, "idleMinutes": 10}}),
        ({"reset": {"idleMinutes": 3}, "idleMinutes": 10}, {"reset": {"idleMinutes": 3}}),
        (
            {"resetByType": {"group": {"mode": "idle"}}, "idleMinutes": 10},
            {"resetByType": {"group": {"mode": "idle"}}, "reset": {"idleMinutes": 10}},
        ),
        ({"reset": None, "idleMinutes": 10}, {"reset": {"mode": "idle", "idleMinutes": 10}}),
        ({"idleMinutes": None}, {}),
        ({"idleMinutes": "ten"}, {"idleMinutes": "ten"}),  # invalid: left for the error report
    ],
)
def test_idle_minutes_mapping(session: dict[str, Any], expected: dict[str, Any]) -> None:
    new, _ = migrate_legacy_config({"session": session})
    assert new == {"session": expected}


_rule = st.fixed_dictionaries(
    {},
    optional={
        "mode": st.sampled_from(["daily", "idle"]),
        "atHour": st.integers(0, 23),
        "idleMinutes": st.one_of(st.none(), st.integers(0, 500)),
    },
)


@given(
    idle=st.one_of(st.none(), st.integers(-5, 500), st.floats(0, 500)),
    reset=st.one_of(st.none(), _rule),
    by_type=st.one_of(
        st.none(), st.dictionaries(st.sampled_from(["direct", "dm", "group", "thread"]), _rule, max_size=3)
    ),
    by_channel=st.one_of(
        st.none(), st.dictionaries(st.sampled_from(["discord", "slack"]), _rule, max_size=2)
    ),
    has_reset_key=st.booleans(),
)
def test_migration_keeps_the_effective_policy(
    idle: float | None,
    reset: dict[str, Any] | None,
    by_type: dict[str, Any] | None,
    by_channel: dict[str, Any] | None,
    has_reset_key: bool,
) -> None:
    session: dict[str, Any] = {"idleMinutes": idle}
    if reset is not None or has_reset_key:
        session["reset"] = reset
    if by_type is not None:
        session["resetByType"] = by_type
    if by_channel is not None:
        session["resetByChannel"] = by_channel
    new, _ = migrate_legacy_config({"session": session})
    assert find_legacy_keys(new) == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        before = ResetPolicy.from_mapping(session)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rewritten config has nothing legacy left
        after = ResetPolicy.from_mapping(new["session"])
    for reset_type in ("direct", "group", "thread"):
        for channel in (None, "discord", "slack", "telegram"):
            assert before.resolve(reset_type, channel=channel) == after.resolve(reset_type, channel=channel)
