"""
Hostile input never crashes a reader, never hangs, and never makes a read-only command write (issue 15).

Seeded mutations of the bundled samples (the pi transcripts in ``sessionkeeper/_samples`` and
``tests/data/pi``, OpenClaw transcripts and the ``sessions.json`` store of ``tests/data/openclaw/small``):
byte flips, truncations, line splices (drop, duplicate, swap, join, foreign line), huge numbers (an
integer over 4,300 digits, ``1e400``), deep nesting, lone surrogates, control characters and a wrong
type for a random field of a random line. Each mutated file goes through everything that only reads:

- transcripts: ``load_transcript`` + context rebuild + diagnostics, ``scan_transcript``,
  ``read_tail_context``, ``list_transcripts``, ``TranscriptManager.open`` + context, and the CLI's
  ``context``, ``context --json``, ``tree`` and ``doctor`` (without ``--fix``);
- stores: ``SessionStore.open(read_only=True)`` + ``list``, and the CLI's ``sessions list`` and ``status``;
  ``export`` (``copy_sessions``) into a directory outside the mutated one, with one of the store's
  transcripts mutated as well half of the time (its own generator, so the seeds above mean what they did).

Asserted per mutation: no exception outside ``sessionkeeper.exceptions`` (the CLI: none but its own
exit), no hang (an alarm after ``HANG_S`` seconds), and the directory tree (names, sizes, mtimes and
bytes) is the same after as before. The CI run makes ``DEFAULT_COUNT`` mutations (a fixed seed per
run index, so a failure names the seed to replay); ``--run-slow`` makes ``SLOW_COUNT``, and
``$SESSIONKEEPER_FUZZ_COUNT`` / ``$SESSIONKEEPER_FUZZ_SEED`` set the count and the first seed.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import pytest
from tests._helpers import run_cli

import sessionkeeper
from sessionkeeper.exceptions import SessionKeeperError
from sessionkeeper.store import SessionStore
from sessionkeeper.transcript import (
    TranscriptManager,
    list_transcripts,
    load_transcript,
    read_tail_context,
    scan_transcript,
)


ROOT = Path(__file__).resolve().parents[2]
DEFAULT_COUNT = 250
SLOW_COUNT = 5000
HANG_S = 20.0
MAX_SAMPLE_BYTES = 64 << 10
STORE_DIR = ROOT / "tests" / "data" / "openclaw" / "small"
STORE_KEY = "agent:main:main"


def _transcript_samples() -> list[tuple[str, bytes]]:
    files = sorted((Path(sessionkeeper.__file__).parent / "_samples").glob("*.jsonl"))  # as installed
    files += sorted((ROOT / "tests" / "data" / "pi").glob("*.jsonl"))
    files += sorted(STORE_DIR.glob("*.jsonl"))[:6]
    return [(f.name, f.read_bytes()) for f in files if f.stat().st_size <= MAX_SAMPLE_BYTES]


def _store_sample() -> tuple[bytes, dict[str, bytes]]:
    """``sessions.json`` of the small OpenClaw store and the transcripts of its first entries."""
    data = (STORE_DIR / "sessions.json").read_bytes()
    store = json.loads(data)
    transcripts: dict[str, bytes] = {}
    for entry in list(store.values())[:4]:
        name = f"{entry.get('sessionId')}.jsonl"
        if (STORE_DIR / name).is_file():
            transcripts[name] = (STORE_DIR / name).read_bytes()
    return data, transcripts


# --------------------------------------------------------------------------- mutations

HUGE_INT = "9" * 5000
WRONG_VALUES: list[Any] = [None, 0, -1, 1.5, 1e308, True, "", "x", [], {}, [1, [2]], {"a": None}, "\ud800"]
NUMBER = re.compile(rb"(?<![\w.\"])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _flip(rng: random.Random, data: bytes, _other: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def _random_byte(rng: random.Random, data: bytes, _other: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    byte = bytes(
        [
            rng.choice(
                [0, 0x0A, 0x0D, 0x22, 0x5C, 0x7B, 0x7D, 0x80, 0xC3, 0xED, 0xEF, 0xFF, rng.randrange(256)]
            )
        ]
    )
    return data[:at] + byte + data[at + rng.randint(0, 1) :]


def _truncate(rng: random.Random, data: bytes, _other: bytes) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def _splice(rng: random.Random, data: bytes, other: bytes) -> bytes:
    lines = _lines(data)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    op = rng.randrange(6)
    if op == 0:
        del lines[i]
    elif op == 1:
        lines.insert(j, lines[i])
    elif op == 2:
        lines[i], lines[j] = lines[j], lines[i]
    elif op == 3 and i + 1 < len(lines):
        lines[i : i + 2] = [lines[i] + lines[i + 1]]
    elif op == 4:
        foreign = [line for line in _lines(other) if line]
        lines.insert(j, rng.choice(foreign) if foreign else b"{}")
    else:
        lines.insert(j, rng.choice([b"", b" ", b"null", b"[]", b"1", b'"s"', b"{", b"\xef\xbb\xbf{}"]))
    return b"\n".join(lines)


def _huge_number(rng: random.Random, data: bytes, _other: bytes) -> bytes:
    spans = [m.span() for m in NUMBER.finditer(data)]
    value = rng.choice(
        [
            HUGE_INT.encode(),
            b"-" + HUGE_INT.encode(),
            b"1e400",
            b"-1e400",
            b"1" * 400,
            b"0.0" + b"0" * 5000 + b"1",
        ]
    )
    if not spans:
        return data + value
    start, end = rng.choice(spans)
    return data[:start] + value + data[end:]


def _deep(rng: random.Random, data: bytes, _other: bytes) -> bytes:
    depth = rng.choice([900, 1100, 5000, 100_000])
    nested = (b"[" * depth + b"]" * depth) if rng.random() < 0.5 else (b'{"a":' * depth + b"1" + b"}" * depth)
    spans = [m.span() for m in NUMBER.finditer(data)] or [(len(data), len(data))]
    start, end = rng.choice(spans)
    return data[:start] + nested + data[end:]


def _surrogate(rng: random.Random, data: bytes, _other: bytes) -> bytes:
    spans = [m.span() for m in STRING.finditer(data)]
    if not spans:
        return data
    start, end = rng.choice(spans)
    at = rng.randint(start + 1, end - 1)
    escape = rng.choice(
        [b"\\ud800", b"\\udfff", b"\\ud83d", b"\\ude00x", b"\\u0000", b"\\u2028", b"\\ud800\\ud800"]
    )
    return data[:at] + escape + data[at:]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield (*prefix, n)
            yield from _paths(item, (*prefix, n))


def _wrong_type(rng: random.Random, data: bytes, _other: bytes) -> bytes:
    """A random field of a random line (or of the whole file, as ``sessions.json``) gets a wrong value."""
    try:
        whole = json.loads(data)
    except (ValueError, RecursionError):
        whole = None
    if isinstance(whole, dict):
        return _wrong_value(rng, whole, 2) or data
    lines = _lines(data)
    candidates = [n for n, line in enumerate(lines) if line.strip()]
    if not candidates:
        return data
    n = rng.choice(candidates)
    try:
        value = json.loads(lines[n])
    except (ValueError, RecursionError):
        return data
    lines[n] = _wrong_value(rng, value, None) or lines[n]
    return b"\n".join(lines)


def _wrong_value(rng: random.Random, value: Any, indent: int | None) -> bytes | None:
    paths = list(_paths(value))
    if not paths:
        return None
    path = rng.choice(paths)
    target = value
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = rng.choice([*WRONG_VALUES, HUGE_INT])
    # ensure_ascii: a lone surrogate as the escape JSON.parse reads; otherwise as raw (invalid UTF-8) bytes
    text = json.dumps(
        value, indent=indent, separators=None if indent else (",", ":"), ensure_ascii=rng.random() < 0.5
    )
    text = text.replace(f'"{HUGE_INT}"', HUGE_INT)  # the huge integer as a number literal
    return text.encode("utf-8", "surrogatepass")


MUTATIONS: dict[str, Callable[[random.Random, bytes, bytes], bytes]] = {
    "flip": _flip,
    "byte": _random_byte,
    "truncate": _truncate,
    "splice": _splice,
    "huge-number": _huge_number,
    "deep": _deep,
    "surrogate": _surrogate,
    "wrong-type": _wrong_type,
}


def _mutate(rng: random.Random, data: bytes, other: bytes) -> tuple[str, bytes]:
    names = rng.sample(sorted(MUTATIONS), rng.choice([1, 1, 1, 2, 3]))
    for name in names:
        data = MUTATIONS[name](rng, data, other)
    return "+".join(names), data


# --------------------------------------------------------------------------- checks


class _Hang(BaseException):
    """Raised by the alarm: an operation ran longer than ``HANG_S``."""


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    raise _Hang(f"no answer within {HANG_S} s")


@contextmanager
def _deadline() -> Iterator[None]:
    """
    Raise :class:`_Hang` in the body after ``HANG_S`` s; then give back the previous SIGALRM handler
    and what was left of its timer (pytest-timeout's own alarm, which a bare ``setitimer(0)`` cancelled).
    """
    previous = signal.signal(signal.SIGALRM, _alarm)
    started = time.monotonic()
    outer, _interval = signal.setitimer(signal.ITIMER_REAL, HANG_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))


def _snapshot(root: Path) -> dict[str, tuple[int, int, bytes]]:
    found: dict[str, tuple[int, int, bytes]] = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        found[str(path.relative_to(root))] = (
            st.st_size,
            st.st_mtime_ns,
            path.read_bytes() if path.is_file() else b"",
        )
    return found


def _guard(failures: list[str], label: str, call: Callable[[], object]) -> None:
    try:
        call()
    except SessionKeeperError:
        pass
    except _Hang:
        failures.append(f"{label}: hang")
    except Exception as err:  # the assertion is "nothing else escapes"
        frames = traceback.extract_tb(err.__traceback__)
        where = next(
            (
                f"{Path(f.filename).name}:{f.lineno}"
                for f in reversed(frames)
                if "sessionkeeper" in f.filename
            ),
            "?",
        )
        failures.append(f"{label}: {type(err).__name__} at {where}: {str(err)[:120]}")


def _cli(failures: list[str], label: str, args: list[str]) -> None:
    result = run_cli(*args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        err = result.exception
        if isinstance(err, _Hang):
            failures.append(f"{label} {args[0]}: hang")
            return
        frames = traceback.extract_tb(err.__traceback__)
        where = next(
            (
                f"{Path(f.filename).name}:{f.lineno}"
                for f in reversed(frames)
                if "sessionkeeper" in f.filename
            ),
            "?",
        )
        failures.append(
            f"{label} cli {' '.join(args[:2])}: {type(err).__name__} at {where}: {str(err)[:120]}"
        )


def _read_transcript(path: Path, failures: list[str], label: str) -> None:
    def load() -> None:
        index = load_transcript(path)
        index.build_context()
        index.diagnostics.to_json()
        json.dumps(index.diagnostics.to_json())

    async def manager() -> None:
        opened = await TranscriptManager.open(path)
        opened.build_session_context()
        opened.tree()

    _guard(failures, f"{label} load", load)
    _guard(failures, f"{label} scan", lambda: scan_transcript(path))
    _guard(failures, f"{label} tail", lambda: read_tail_context(path))
    _guard(failures, f"{label} list", lambda: [i.to_json() for i in list_transcripts(path.parent)])
    _guard(failures, f"{label} open", lambda: anyio.run(manager))
    for args in (
        ["context", str(path)],
        ["context", str(path), "--json"],
        ["tree", str(path)],
        ["doctor", str(path)],
    ):
        _cli(failures, label, args)


def _read_store(folder: Path, failures: list[str], label: str) -> None:
    async def listing() -> None:
        store = SessionStore.open(folder, read_only=True)
        try:
            await store.list()
            await store.get(STORE_KEY)
        finally:
            await store.aclose()

    _guard(failures, f"{label} store", lambda: anyio.run(listing))
    _cli(failures, label, ["sessions", "list", "--store", str(folder)])
    _cli(failures, label, ["sessions", "list", "--store", str(folder), "--json"])
    _cli(failures, label, ["status", "--store", str(folder), STORE_KEY, "--json"])
    _cli(failures, label, ["doctor", str(folder)])
    out = folder.with_name(f"{folder.name}-export")
    _cli(failures, label, ["export", "--store", str(folder), "--out", str(out), "--json"])
    shutil.rmtree(out, ignore_errors=True)


def _fuzz(tmp_path: Path, count: int, first_seed: int) -> tuple[int, list[str]]:
    transcripts = _transcript_samples()
    store_data, store_transcripts = _store_sample()
    failures: list[str] = []
    for run in range(count):
        seed = first_seed + run
        rng = random.Random(seed)
        folder = tmp_path / f"m{run}"
        folder.mkdir()
        if rng.random() < 0.2:
            kind, data = _mutate(rng, store_data, rng.choice(transcripts)[1])
            (folder / "sessions.json").write_bytes(data)
            for name, content in store_transcripts.items():
                (folder / name).write_bytes(content)
            label = f"seed {seed} sessions.json {kind}"
            extra = random.Random(f"transcript {seed}")
            if store_transcripts and extra.random() < 0.5:
                name = extra.choice(sorted(store_transcripts))
                kind, data = _mutate(extra, store_transcripts[name], extra.choice(transcripts)[1])
                (folder / name).write_bytes(data)
                label += f" + {name} {kind}"
            before = _snapshot(folder)
            with _deadline():
                _read_store(folder, failures, label)
        else:
            name, sample = rng.choice(transcripts)
            kind, data = _mutate(rng, sample, rng.choice(transcripts)[1])
            path = folder / "f0e1d2c3-0000-4000-8000-000000000000.jsonl"
            path.write_bytes(data)
            label = f"seed {seed} {name} {kind}"
            before = _snapshot(folder)
            with _deadline():
                _read_transcript(path, failures, label)
        if _snapshot(folder) != before:
            failures.append(f"{label}: a read-only call changed or created a file")
        shutil.rmtree(folder)
    return count, failures


@pytest.mark.timeout(4 * 3600)  # the opt-in runs are long; ``HANG_S`` per mutation is the hang guard
def test_hostile_input_never_crashes_hangs_or_writes(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    count = DEFAULT_COUNT
    if request.config.getoption("--run-slow"):
        count = SLOW_COUNT
    count = int(os.environ.get("SESSIONKEEPER_FUZZ_COUNT", count))
    first_seed = int(os.environ.get("SESSIONKEEPER_FUZZ_SEED", "0"))
    tried, failures = _fuzz(tmp_path, count, first_seed)
    assert tried == count
    assert not failures, f"{len(failures)} failures in {tried} mutations:\n" + "\n".join(failures[:40])
