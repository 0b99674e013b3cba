"""
The one configuration loader every part uses (DESIGN decision 4).

OpenClaw's config tree is the schema: ``session.*``, ``session.maintenance.*``, ``session.writeLock.*``,
``agents.defaults.compaction.*``, ``agents.defaults.contextPruning.*``, ``cron.*``, with the references'
camelCase keys, their units per key (``pruneAfter`` defaults to days, ``ttl`` to minutes) and their
strings (``"30d"``, ``"10mb"``, ``"80%"``). pi's ``settings.json`` ``compaction`` block is accepted by
:func:`load_config` too (it is mapped onto ``agents.defaults.compaction``).

Config files are JSON5, as OpenClaw reads ``~/.openclaw/openclaw.json``: comments, trailing commas,
unquoted keys, single-quoted strings (:func:`parse_config_text`). Strict JSON takes the fast path (msgspec);
only a file that is not strict JSON is parsed by the ``json5`` package.

Each settings class (an ``attrs`` frozen class living next to the code it configures) declares its
fields with :func:`setting`; :func:`structure_settings` turns one section of the tree into an instance,
parsing each value with the field's parser and structuring the rest with the shared ``cattrs``
converter. Every error is a :class:`~sessionkeeper.exceptions.ConfigError` naming the dotted key.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar, cast

import attrs
import cattrs
import json5
import msgspec

from sessionkeeper.exceptions import ConfigError


__all__ = (
    "Config",
    "Parser",
    "load_config",
    "parse_bool",
    "parse_byte_size",
    "parse_choice",
    "parse_config_text",
    "parse_duration_ms",
    "parse_finite_number",
    "parse_non_negative_int",
    "parse_optional_bool",
    "parse_optional_str",
    "parse_positive_number",
    "parse_ratio",
    "parse_ratio_text",
    "setting",
    "structure_settings",
)

T = TypeVar("T")

_DURATION_UNITS: Final = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# ASCII digits only and a leading digit required, as OpenClaw's JavaScript regexes (``\d`` is ASCII there).
_DURATION_ONE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)?\Z")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)")
_BYTE_UNITS: Final = {
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
}
_BYTES = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([a-z]+)?\Z")
_MAX_SAFE_INTEGER: Final = 2**53 - 1

_converter = cattrs.Converter(forbid_extra_keys=False)


def _round_half_up(value: float) -> int:
    """JavaScript's ``Math.round``: halves round towards +infinity."""
    return math.floor(value + 0.5)


def parse_duration_ms(value: object, *, default_unit: str = "ms", key: str | None = None) -> int:
    """
    Parse a duration the way OpenClaw's ``parseDurationMs`` does (OpenClaw spec §2.1).

    Accepts a number (in ``default_unit``) or a string, trimmed and lowercased: one
    ``<number>(ms|s|m|h|d)?`` (a missing unit means ``default_unit``) or a concatenation of
    unit-suffixed parts such as ``"1h30m"``. Decimals are allowed; the result is rounded.

    Args:
        value: The raw config value.
        default_unit: Unit of a bare number: ``ms``, ``s``, ``m``, ``h`` or ``d``.
        key: Dotted config key, for the error message.

    Returns:
        The duration in milliseconds (a safe integer, >= 0).

    Raises:
        ConfigError: The value is not a duration.
    """
    factor = _DURATION_UNITS[default_unit]
    if isinstance(value, bool):
        raise ConfigError(f"expected a duration, got {value!r}", key=key)
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"expected a non-negative duration, got {value!r}", key=key)
        total = float(value) * factor
    elif isinstance(value, str):
        text = value.strip().lower()
        single = _DURATION_ONE.match(text)
        if single:
            total = float(single.group(1)) * _DURATION_UNITS[single.group(2) or default_unit]
        else:
            parts = list(_DURATION_PART.finditer(text))
            if not parts or "".join(p.group(0) for p in parts) != text:
                raise ConfigError(f"invalid duration {value!r} (e.g. '30d', '1h30m', '500ms')", key=key)
            total = sum(float(p.group(1)) * _DURATION_UNITS[p.group(2)] for p in parts)
    else:
        raise ConfigError(f"expected a duration, got {type(value).__name__}", key=key)
    result = _round_half_up(total)
    if result > _MAX_SAFE_INTEGER:
        raise ConfigError(f"duration {value!r} is too large", key=key)
    return result


def parse_byte_size(value: object, *, default_unit: str = "b", key: str | None = None) -> int:
    """
    Parse a byte size the way OpenClaw's ``parseByteSize`` does (OpenClaw spec §2.1).

    ``^(\\d+(\\.\\d+)?)([a-z]+)?$`` after lowercasing; units ``b``, ``k``/``kb``, ``m``/``mb``,
    ``g``/``gb``, ``t``/``tb`` are binary (1024-based). A bare number uses ``default_unit``.

    Args:
        value: The raw config value (number or string such as ``"10mb"``).
        default_unit: Unit of a bare number.
        key: Dotted config key, for the error message.

    Returns:
        The size in bytes (rounded).

    Raises:
        ConfigError: The value is not a byte size or the unit is unknown.
    """
    if isinstance(value, bool):
        raise ConfigError(f"expected a byte size, got {value!r}", key=key)
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"expected a non-negative byte size, got {value!r}", key=key)
        return _round_half_up(float(value) * _BYTE_UNITS[default_unit])
    if not isinstance(value, str):
        raise ConfigError(f"expected a byte size, got {type(value).__name__}", key=key)
    match = _BYTES.match(value.strip().lower())
    if not match:
        raise ConfigError(f"invalid byte size {value!r} (e.g. '10mb', '512k', '1048576')", key=key)
    unit = match.group(2) or default_unit
    if unit not in _BYTE_UNITS:
        raise ConfigError(f"unknown byte unit {unit!r} in {value!r}", key=key)
    return _round_half_up(float(match.group(1)) * _BYTE_UNITS[unit])


def parse_ratio_text(value: str, *, key: str | None = None, example: float = 0.8) -> float:
    """
    The number a ratio string gives: ``"80%"`` is 0.8, ``"0.8"`` is 0.8 (not range-checked).

    Raises:
        ConfigError: Neither a number nor a percentage; the message suggests ``example``.
    """
    text = value.strip()
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        hint = f"e.g. {example:g} or '{example * 100:g}%'"
        raise ConfigError(f"invalid ratio {value!r} ({hint})", key=key) from None


def parse_ratio(value: object, *, key: str | None = None) -> float:
    """
    Parse a ratio: a number in ``[0, 1]`` or a percentage string such as ``"80%"``.

    Raises:
        ConfigError: Not a number or percentage, or outside ``[0, 1]``.
    """
    if isinstance(value, bool):
        raise ConfigError(f"expected a ratio, got {value!r}", key=key)
    if isinstance(value, str):
        ratio = parse_ratio_text(value, key=key)
    elif isinstance(value, int | float):
        ratio = float(value)
    else:
        raise ConfigError(f"expected a ratio, got {type(value).__name__}", key=key)
    if not (0.0 <= ratio <= 1.0):
        raise ConfigError(f"ratio {value!r} is outside [0, 1]", key=key)
    return ratio


Parser = Callable[[object, str], Any]
"""A field parser: ``(raw value, dotted key) -> parsed value``; raises ConfigError."""


# -- field parsers shared by the settings classes: ``(raw value, dotted key) -> value`` -----------------


def parse_bool(raw: object, key: str) -> bool:
    """
    ``true`` or ``false`` exactly (no ``0``/``1``, no strings).

    Raises:
        ConfigError: Anything else (``expected true or false``).
    """
    if not isinstance(raw, bool):
        raise ConfigError(f"expected true or false, got {raw!r}", key=key)
    return raw


def parse_optional_bool(raw: object, key: str) -> bool | None:
    """:func:`parse_bool`, or ``None`` for ``null``/unset."""
    return None if raw is None else parse_bool(raw, key)


def parse_optional_str(raw: object, key: str) -> str | None:
    """
    A string, trimmed; ``None`` for ``null`` or a blank string.

    Raises:
        ConfigError: Not a string (``expected a string, got <type name>``).
    """
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ConfigError(f"expected a string, got {type(raw).__name__}", key=key)
    return raw.strip() or None


def parse_finite_number(raw: object, key: str) -> float:
    """
    A finite number (``bool`` is not a number; JSON5's ``NaN``/``Infinity`` are refused).

    Raises:
        ConfigError: Anything else (``expected a finite number``).
    """
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise ConfigError(f"expected a finite number, got {raw!r}", key=key)
    return float(raw)


def parse_positive_number(raw: object, key: str) -> float:
    """
    A finite number ``> 0`` (a timeout: ``NaN`` passes ``<= 0`` and Infinity would never expire).

    Raises:
        ConfigError: Anything else (``expected a positive finite number``).
    """
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or raw <= 0:
        raise ConfigError(f"expected a positive finite number, got {raw!r}", key=key)
    return float(raw)


def parse_non_negative_int(raw: object, key: str) -> int:
    """
    A whole number ``>= 0``; a float with no fraction (``5.0``) is accepted as ``5``.

    Raises:
        ConfigError: A bool, a non-number, ``NaN``/``Infinity``, a negative number or a fraction
            (``expected a non-negative integer``).
    """
    if (
        isinstance(raw, bool)
        or not isinstance(raw, int | float)
        or not math.isfinite(raw)  # NaN/Infinity (JSON5) are no counts; int() of them would raise
        or raw < 0
        or raw != int(raw)
    ):
        raise ConfigError(f"expected a non-negative integer, got {raw!r}", key=key)
    return int(raw)


def parse_choice(*allowed: str) -> Callable[[object, str], str]:
    """
    A parser accepting exactly one of the strings ``allowed``.

    Raises:
        ConfigError: (from the parser) Any other value (``expected one of a, b; got x``).
    """

    def parse(raw: object, key: str) -> str:
        if raw not in allowed:
            raise ConfigError(f"expected one of {', '.join(allowed)}; got {raw!r}", key=key)
        return str(raw)

    return parse


_META_KEY: Final = "sessionkeeper.config"


@attrs.frozen
class _FieldSpec:
    key: str | None
    parse: Parser | None
    aliases: tuple[str, ...]
    deprecated: tuple[str, ...]


def setting(
    *,
    default: Any = attrs.NOTHING,
    factory: Callable[[], Any] | None = None,
    key: str | None = None,
    parse: Parser | None = None,
    aliases: tuple[str, ...] = (),
    deprecated: tuple[str, ...] = (),
    validator: Any = None,
) -> Any:
    """
    Declare a settings field with its config key and parser (use inside an ``attrs`` class).

    Args:
        default: The reference's default.
        factory: A default factory instead of ``default``.
        key: The camelCase config key; ``None`` derives it from the field name (``keep_recent_tokens``
            -> ``keepRecentTokens``).
        parse: Parser for the raw value; ``None`` structures it with cattrs to the field's type.
        aliases: Other keys accepted silently (e.g. pi's names).
        deprecated: Legacy keys accepted with a :class:`DeprecationWarning`.
        validator: An ``attrs`` validator.
    """
    metadata = {_META_KEY: _FieldSpec(key=key, parse=parse, aliases=aliases, deprecated=deprecated)}
    if factory is not None:
        return attrs.field(factory=factory, metadata=metadata, validator=validator, kw_only=True)
    return attrs.field(default=default, metadata=metadata, validator=validator, kw_only=True)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def structure_settings(cls: type[T], section: Mapping[str, Any] | None, *, prefix: str) -> T:
    """
    Build a settings instance from one section of the config tree.

    Keys missing from ``section`` keep the class defaults. Unknown keys are ignored (the tree is
    shared with the host's other settings).

    Args:
        cls: An ``attrs`` class whose fields are declared with :func:`setting` (plain attrs fields
            are accepted too, under their camelCase name).
        section: The mapping at ``prefix`` (``None`` or empty means all defaults).
        prefix: Dotted path of the section, used in error messages (``"session.maintenance"``).

    Returns:
        The settings instance.

    Raises:
        ConfigError: A value could not be parsed or failed validation; ``key`` names it.
    """
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        raise ConfigError(f"expected an object, got {type(section).__name__}", key=prefix)
    kwargs: dict[str, Any] = {}
    attrs_cls = cast("type[attrs.AttrsInstance]", cls)
    with contextlib.suppress(NameError):  # string annotations (PEP 563) -> real types, for cattrs
        attrs.resolve_types(attrs_cls)
    for field in attrs.fields(attrs_cls):
        spec: _FieldSpec = field.metadata.get(_META_KEY) or _FieldSpec(None, None, (), ())
        name = field.alias or field.name
        key = spec.key or _camel(field.name)
        found: str | None = None
        for candidate in (key, *spec.aliases, *spec.deprecated):
            if candidate in section:
                found = candidate
                break
        if found is None:
            continue
        dotted = f"{prefix}.{found}" if prefix else found
        if found in spec.deprecated:
            warnings.warn(
                f"config key {dotted!r} is deprecated; use {prefix + '.' if prefix else ''}{key}",
                DeprecationWarning,
                stacklevel=2,
            )
        raw = section[found]
        try:
            if spec.parse is not None:
                kwargs[name] = spec.parse(raw, dotted)
            else:
                kwargs[name] = _converter.structure(raw, field.type)
        except ConfigError:
            raise
        except (cattrs.BaseValidationError, TypeError, ValueError) as err:
            raise ConfigError(f"invalid value {raw!r}: {err}", key=dotted) from err
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:
        raise ConfigError(f"invalid settings: {err}", key=prefix) from err


@attrs.frozen
class Config:
    """
    A parsed configuration tree (OpenClaw's ``openclaw.json`` layout, camelCase keys).

    Attributes:
        tree: The raw tree. Use :meth:`section` to read a part of it.
        source: Where it was loaded from, if from a file.
    """

    tree: Mapping[str, Any] = attrs.field(factory=dict)
    source: Path | None = None

    def section(self, path: str) -> Mapping[str, Any]:
        """
        Return the mapping at a dotted ``path`` (``"session.maintenance"``), or ``{}`` when absent.

        Raises:
            ConfigError: A node on the path is not an object.
        """
        node: Any = self.tree
        walked: list[str] = []
        for part in path.split("."):
            walked.append(part)
            if not isinstance(node, Mapping):
                raise ConfigError("expected an object", key=".".join(walked[:-1]))
            node = node.get(part)
            if node is None:
                return {}
        if not isinstance(node, Mapping):
            raise ConfigError(f"expected an object, got {type(node).__name__}", key=path)
        return node

    def get(self, path: str, default: Any = None) -> Any:
        """Return the value at a dotted ``path``, or ``default`` when absent."""
        parent, _, leaf = path.rpartition(".")
        node = self.section(parent) if parent else self.tree
        return node.get(leaf, default)


def _merge_pi_settings(tree: dict[str, Any]) -> dict[str, Any]:
    """Map a pi ``settings.json`` (top-level ``compaction`` block) onto OpenClaw's tree."""
    compaction = tree.get("compaction")
    if isinstance(compaction, Mapping) and "agents" not in tree and "session" not in tree:
        agents = {"defaults": {"compaction": dict(compaction)}}
        return {**{k: v for k, v in tree.items() if k != "compaction"}, "agents": agents}
    return tree


_JSON5_POSITION = re.compile(r"^<string>:(\d+) (.*) at column (\d+)$", re.DOTALL)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _join_surrogate_pairs(value: Any) -> Any:
    """
    Join the escaped surrogate pairs the ``json5`` package leaves split (``"\\ud83e\\udd9e"`` is one
    character, 🦞, in JSON5 as in JavaScript); lone surrogates stay as they are.
    """
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if isinstance(value, list):
        return [_join_surrogate_pairs(item) for item in value]
    if isinstance(value, dict):
        return {_join_surrogate_pairs(k): _join_surrogate_pairs(v) for k, v in value.items()}
    return value


def _not_json_constant(name: str) -> Any:
    """``NaN`` / ``Infinity`` are JSON5, not JSON: the stdlib decoder must not take them as strict JSON."""
    raise ValueError(f"{name} is not JSON")


def parse_config_text(text: str, *, source: Path | str = "<config>") -> tuple[Any, bool]:
    """
    Parse the text of a config file as JSON5 (OpenClaw reads ``openclaw.json`` as JSON5).

    Strict JSON is decoded first (msgspec, fast); text that is not strict JSON (comments, trailing commas,
    unquoted keys, single quotes, hexadecimal numbers, ``Infinity``...) is parsed with the ``json5``
    package.

    Args:
        text: The file's text (a leading BOM is allowed).
        source: The file, named in error messages.

    Returns:
        ``(value, strict)``: the parsed value (any JSON type) and whether the text was strict JSON.

    Raises:
        ConfigError: The text is not JSON5; the message names the file, line and column
            (``openclaw.json:3:7: not valid JSON5: Unexpected "@"``).
    """
    body = text.removeprefix("\ufeff")
    try:
        return msgspec.json.decode(body), True
    except (msgspec.DecodeError, RecursionError):
        pass  # not strict JSON, or strict JSON with a lone surrogate escape, which msgspec refuses
    try:
        return json.loads(body, parse_constant=_not_json_constant), True
    except (ValueError, RecursionError):
        pass  # not strict JSON: parse as JSON5
    try:
        return _join_surrogate_pairs(json5.loads(body)), False
    except RecursionError as err:
        raise ConfigError(f"{source}: not usable JSON5: nested too deeply") from err
    except ValueError as err:
        message = str(err)
        found = _JSON5_POSITION.match(message)
        if found is not None:
            line, reason, column = found.groups()
            raise ConfigError(f"{source}:{line}:{column}: not valid JSON5: {reason}") from err
        raise ConfigError(f"{source}:1:1: not valid JSON5: {message}") from err


def load_config(source: Path | str | Mapping[str, Any] | None = None) -> Config:
    """
    Load a configuration tree.

    Args:
        source: A path to a JSON5 (or JSON) file (OpenClaw's ``openclaw.json`` or pi's ``settings.json``),
            a mapping already parsed, or ``None`` for an empty tree (all defaults).

    Returns:
        The :class:`Config`. A pi ``settings.json`` (top-level ``compaction`` block) is mapped onto
        ``agents.defaults.compaction``.

    Raises:
        ConfigError: The file cannot be read, is not JSON5 (the message names file, line and column), or
            is not an object.
    """
    if source is None:
        return Config()
    if isinstance(source, Mapping):
        return Config(tree=_merge_pi_settings(dict(source)))
    path = Path(source).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from err
    tree, _ = parse_config_text(text, source=path)
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: the config must be a JSON object")
    return Config(tree=_merge_pi_settings(tree), source=path)
