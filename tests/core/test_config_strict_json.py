"""Config text parsing tells strict JSON from JSON5 (lone surrogate escapes, constants, NUL escapes)."""

from __future__ import annotations

from sessionkeeper._config import parse_config_text


def test_strict_json_with_a_lone_surrogate_escape_is_strict_json() -> None:
    # msgspec refuses a lone "\ud800" escape, which JSON allows: the text was reported as JSON5 (not strict),
    # so doctor --fix would claim JSON5 formatting was dropped from a plain JSON file.
    assert parse_config_text('{"a": "\\ud800", "b": [1, 2.5, null, true]}') == (
        {"a": "\ud800", "b": [1, 2.5, None, True]},
        True,
    )


def test_json5_constants_are_still_json5() -> None:
    for text, value in (("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf")):
        tree, strict = parse_config_text(f'{{"a": "\\ud800", "n": {text}}}')
        assert strict is False
        assert str(tree["n"]) == value


def test_a_nul_before_a_digit_reads_back() -> None:
    assert parse_config_text("{a: '\\u00000', b: '\\0x'}") == ({"a": "\x000", "b": "\x00x"}, False)
