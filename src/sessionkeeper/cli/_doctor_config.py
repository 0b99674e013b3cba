"""
``sessionkeeper doctor CONFIG.json``: check an OpenClaw config (``openclaw.json`` layout) or a pi
``settings.json``, recognised by content (DESIGN decision 4).

Two built-in :class:`~sessionkeeper.cli._doctor_checks.ConfigCheck` s:

- ``legacy-config-keys``: keys the references dropped (``session.maintenance.rotateBytes``,
  ``session.parentForkMaxTokens``, the top-level ``session.idleMinutes``; see
  :data:`sessionkeeper.store.LEGACY_CONFIG_KEYS`). Fixable.
- ``invalid-config-values``: every settings class's ``from_config`` is run on the file
  (:class:`MaintenanceSettings`, :class:`ResetPolicy`, :class:`WriteLockSettings`,
  :class:`CompactionSettings`, :class:`PruningSettings`, :class:`MemoryFlushSettings`,
  :class:`RuntimeSettings`, :class:`CronSettings`); each :class:`ConfigError` is reported with its dotted
  key. Not fixable (a value is never guessed).

``--fix`` writes a 0600 backup (``<name>.bak.<stamp>``) and rewrites the JSON atomically (0600, two-space
indent) without the legacy keys, with :func:`sessionkeeper.store.migrate_legacy_config` (every other key
and its order kept; ``session.idleMinutes`` moved under ``session.reset`` with the same effective policy).

Config files are JSON5 (as OpenClaw reads them). The rewrite is strict JSON, as OpenClaw's own
``doctor --fix`` writes ``openclaw.json`` (``JSON.stringify``): comments, unquoted keys and trailing commas
of a JSON5 file are not kept. The fix still runs (an operator asking for ``--fix`` wants the legacy keys
gone, and the backup holds the original text, comments included), and the report says so: an ``info``
finding ``json5-formatting-dropped`` naming the backup, and the same sentence in ``changes``. A tree
holding a value strict JSON cannot write (``NaN``, ``Infinity``) is not rewritten (an error finding).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

import attrs

from sessionkeeper._config import Config, load_config, parse_config_text
from sessionkeeper._fs import atomic_write_bytes, backup_file
from sessionkeeper.cli._doctor_checks import ConfigCheck, ConfigTarget, DoctorRegistry, Finding
from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.pruning import PruningSettings
from sessionkeeper.runtime import MemoryFlushSettings, RuntimeSettings
from sessionkeeper.store import (
    CronSettings,
    MaintenanceSettings,
    ResetPolicy,
    find_legacy_keys,
    migrate_legacy_config,
)
from sessionkeeper.transcript import WriteLockSettings


__all__ = (
    "ConfigRun",
    "builtin_config_checks",
    "read_config_file",
    "run_config_checks",
)

_MAX_CONFIG_BYTES: Final = 16 * 1024 * 1024

# Top-level keys of OpenClaw's config (openclaw.json) and of pi's settings.json.
_OPENCLAW_KEYS: Final = frozenset(
    {"session", "agents", "cron", "models", "channels", "gateway", "plugins", "tools", "messages", "hooks",
     "auth", "browser", "commands", "skills", "memory", "logging", "ui", "wizard", "meta", "env", "bindings"}
)  # fmt: skip
_PI_KEYS: Final = frozenset(
    {"compaction", "defaultProvider", "defaultModel", "defaultThinkingLevel", "theme", "retry",
     "steeringMode", "followUpMode", "shellPath", "hideThinkingBlock", "branchSummary", "packages",
     "extensions", "enabledModels", "quietStartup", "lastChangelogVersion", "images", "terminal"}
)  # fmt: skip

_PI_PREFIX: Final = "agents.defaults.compaction"

_SETTINGS: Final[tuple[tuple[str, Callable[[Config], object]], ...]] = (
    ("MaintenanceSettings", MaintenanceSettings.from_config),
    ("ResetPolicy", ResetPolicy.from_config),
    ("WriteLockSettings", lambda config: WriteLockSettings.from_config(config, env={})),
    ("CompactionSettings", CompactionSettings.from_config),
    ("PruningSettings", PruningSettings.from_config),
    ("MemoryFlushSettings", MemoryFlushSettings.from_config),
    ("RuntimeSettings", RuntimeSettings.from_config),
    ("CronSettings", CronSettings.from_config),
)


def read_config_file(path: Path) -> ConfigTarget | None:
    """
    Recognise a config file by content: one JSON5 object (strict JSON included; not a transcript header)
    with at least one top-level key of OpenClaw's config (``session``, ``agents``, ``cron``, ...) or of
    pi's ``settings.json`` (``compaction``, ``defaultProvider``, ...).

    Returns:
        The target, or ``None`` when the file is not such a config (``*.jsonl``, not JSON5, not an
        object, or no known key).
    """
    if path.suffix == ".jsonl" or not path.is_file() or path.stat().st_size > _MAX_CONFIG_BYTES:
        return None
    try:
        tree, _ = parse_config_text(path.read_bytes().decode("utf-8"), source=path)
    except (UnicodeDecodeError, ConfigError):
        return None
    if not isinstance(tree, dict) or "type" in tree:
        return None
    keys = set(tree)
    if keys & _OPENCLAW_KEYS:
        return ConfigTarget(path=path, tree=tree, kind="openclaw")
    if keys & _PI_KEYS:
        return ConfigTarget(path=path, tree=tree, kind="pi")
    return None


@attrs.frozen
class _LegacyKeysCheck:
    """Keys the references dropped (OpenClaw ``legacy-config-migrations.runtime.session.ts``)."""

    id: str = "legacy-config-keys"
    description: str = "legacy config keys the references dropped"

    def check_config(self, target: ConfigTarget) -> Iterable[Finding]:
        return [
            Finding(
                check=self.id, severity="warning", message=legacy.message, ids=(legacy.key,), fixable=True
            )
            for legacy in find_legacy_keys(target.tree)
        ]


@attrs.frozen
class _InvalidValuesCheck:
    """Every settings class's ``from_config`` on the file; each ``ConfigError`` names its key."""

    id: str = "invalid-config-values"
    description: str = "config values the settings classes refuse"

    def check_config(self, target: ConfigTarget) -> Iterable[Finding]:
        try:
            config = load_config(target.tree)
        except ConfigError as err:
            return [Finding(check=self.id, severity="error", message=str(err))]
        findings: list[Finding] = []
        seen: set[tuple[str, str]] = set()
        for name, build in _SETTINGS:
            try:
                with warnings.catch_warnings():  # legacy keys are the other check's business
                    warnings.simplefilter("ignore", DeprecationWarning)
                    build(config)
            except ConfigError as err:
                key = err.key or ""
                if target.kind == "pi" and key.startswith(_PI_PREFIX):  # name the key as the file spells it
                    key = "compaction" + key[len(_PI_PREFIX) :]
                if (key, str(err)) in seen:  # RuntimeSettings repeats the sections it holds
                    continue
                seen.add((key, str(err)))
                findings.append(
                    Finding(
                        check=self.id,
                        severity="error",
                        message=f"{key or 'config'}: {_reason(err)} ({name})",
                        ids=(key,) if key else (),
                    )
                )
        return findings


def _reason(err: ConfigError) -> str:
    text = str(err)
    return text.split(": ", 1)[1] if err.key and text.startswith(f"{err.key}: ") else text


def builtin_config_checks() -> list[ConfigCheck]:
    """The built-in config checks: ``legacy-config-keys``, ``invalid-config-values``."""
    return [_LegacyKeysCheck(), _InvalidValuesCheck()]


@attrs.frozen(kw_only=True)
class ConfigRun:
    """
    What the config checks found in one file, and what ``--fix`` did.

    Attributes:
        findings: What remains wrong.
        fixed: What ``--fix`` repaired.
        changes: The rewrite's changes, one sentence each.
        backup_path: The 0600 backup made before the rewrite, if any.
    """

    findings: tuple[Finding, ...] = ()
    fixed: tuple[Finding, ...] = ()
    changes: tuple[str, ...] = ()
    backup_path: Path | None = None


def _find(target: ConfigTarget, registry: DoctorRegistry) -> list[Finding]:
    return [finding for check in registry.config_checks for finding in check.check_config(target)]


def _js_numbers(value: Any) -> Any:
    """``value`` with whole floats below 1e21 as ints: ``JSON.stringify`` writes ``1e3`` and ``2000.``
    (floats once parsed) as ``1000`` and ``2000``, and ``-0`` as ``0``; Python would write ``1000.0``."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 1e21 else value
    if isinstance(value, dict):
        return {key: _js_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_js_numbers(item) for item in value]
    return value


def _encode(tree: dict[str, Any]) -> bytes:
    """Strict JSON, two-space indent, numbers as ``JSON.stringify`` writes them; ``ValueError`` for a
    value JSON cannot hold (NaN, Infinity)."""
    text = json.dumps(_js_numbers(tree), indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


_JSON5_CHECK: Final = "json5-formatting-dropped"


def _is_strict_json(path: Path) -> bool:
    try:
        return parse_config_text(path.read_bytes().decode("utf-8"), source=path)[1]
    except (UnicodeDecodeError, ConfigError):
        return False


def run_config_checks(target: ConfigTarget, registry: DoctorRegistry, *, fix: bool = False) -> ConfigRun:
    """
    Run the registry's config checks on ``target``; with ``fix``, back the file up (0600) and rewrite it
    without its legacy keys (see the module docstring). Synchronous (small files).

    A JSON5 file (comments, unquoted keys, trailing commas...) is rewritten as strict JSON: the run then
    carries an ``info`` finding ``json5-formatting-dropped`` naming the backup that keeps the original
    text, and says the same in ``changes``.

    Raises:
        OSError: The backup or the rewrite failed (the original file is then unchanged).
    """
    findings = _find(target, registry)
    if not fix or not any(f.fixable for f in findings):
        return ConfigRun(findings=tuple(findings))
    new_tree, changes = migrate_legacy_config(target.tree)
    if not changes:
        return ConfigRun(findings=tuple(findings))
    try:
        data = _encode(new_tree)
    except ValueError as err:
        refused = Finding(
            check="legacy-config-keys",
            severity="error",
            message=f"not rewritten: the config holds a value strict JSON cannot write ({err})",
        )
        return ConfigRun(findings=(*findings, refused))
    strict = _is_strict_json(target.path)
    backup = backup_file(target.path)
    atomic_write_bytes(target.path, data)
    remaining = _find(attrs.evolve(target, tree=new_tree), registry)
    left = {(f.check, f.ids) for f in remaining}
    fixed = tuple(f for f in findings if f.fixable and (f.check, f.ids) not in left)
    if not strict:
        note = (
            "the file was JSON5 and was rewritten as strict JSON: its comments and JSON5 formatting were "
            f"not kept (the original text is in {backup.name})"
        )
        remaining.append(Finding(check=_JSON5_CHECK, severity="info", message=note))
        changes = (*changes, note)
    return ConfigRun(findings=tuple(remaining), fixed=fixed, changes=changes, backup_path=backup)
