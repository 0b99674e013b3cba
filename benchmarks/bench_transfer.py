"""
``copy_sessions`` (``sessionkeeper export`` / ``import``, issue 13): a sessions directory copied into a new
one, against a plain durable file copy of the same bytes measured in the same run.

Run: ``python -m benchmarks transfer [--sessions 800] [--big-mb 200] [--postgres URL]``.

- ``sessions``: N sessions (six ~100-byte lines each) copied by :func:`copy_sessions` (read, write with
  fsync, entries committed 256 at a time) against the anchor: the same transcripts copied by hand, one
  ``O_EXCL`` write + fsync + directory fsync each, then ``sessions.json`` once. Printed as the ratio.
- ``big transcript``: one transcript of ``--big-mb`` MB copied into memory-free targets (a directory):
  the ratio to the anchor's copy of the same file, and the growth of the process's peak resident memory
  (``ru_maxrss``) during the copy, which stays near the 4 MiB batch whatever the size.
- with ``--postgres URL``: the N sessions imported into a new schema of that server (entries and
  transcripts in the database) and exported back into a new directory, each as a ratio to the
  directory-to-directory ``copy_sessions`` above; the schema is dropped afterwards.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import anyio

from sessionkeeper.store import SessionEntry, SessionStore, copy_sessions


LINE = b'{"type":"custom","customType":"bench","data":"' + b"x" * 60 + b'"}'


def _sid(i: int) -> str:
    return f"0190a1b2-0000-7000-8000-{i:012d}"


async def _source(directory: Path, sessions: int, lines: int) -> None:
    await anyio.Path(directory).mkdir(parents=True)

    def fill(entries: dict[str, SessionEntry]) -> None:
        for i in range(sessions):
            entries[f"agent:main:k{i}"] = SessionEntry(session_id=_sid(i), updated_at=i, label="bench")

    async with SessionStore.open(directory, durable=False) as store:
        await store.backend.transaction(fill)
    for i in range(sessions):
        header = b'{"type":"session","version":3,"id":"%s"}\n' % _sid(i).encode()
        with (directory / f"{_sid(i)}.jsonl").open("wb") as out:  # in 1 MB pieces: memory stays flat
            out.write(header)
            for start in range(0, lines, 10_000):
                out.write((LINE + b"\n") * min(10_000, lines - start))


def _anchor_copy(source: Path, target: Path) -> None:
    """The same files copied durably by hand: each transcript, then sessions.json, fsynced."""
    target.mkdir(parents=True)
    for path in source.glob("*.jsonl"):
        with path.open("rb") as src, (target / path.name).open("xb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        dir_fd = os.open(target, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    shutil.copy2(source / "sessions.json", target / "sessions.json")


async def _copy(source: Path | str, target: Path | str) -> None:
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target) as dst:
        report = await copy_sessions(src, dst)
    if not report.ok:
        raise SystemExit(f"copy failed: {report.failed[0].error}")


def _timed(fn: object) -> float:
    start = time.perf_counter()
    if callable(fn):
        fn()
    return time.perf_counter() - start


def main() -> None:
    """Print both measurements as ratios to the anchor (and the big copy's memory growth)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=800)
    parser.add_argument("--big-mb", type=int, default=200)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL to import into and export from")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        root = Path(tmp)
        anyio.run(_source, root / "src", args.sessions, 5)
        anchor = _timed(lambda: _anchor_copy(root / "src", root / "anchor"))
        ours = _timed(lambda: anyio.run(_copy, root / "src", root / "ours"))
        print(
            f"{args.sessions} sessions: copy_sessions {ours:.2f} s, anchor {anchor:.2f} s, "
            f"ratio {ours / anchor:.2f}x"
        )
        if args.postgres:
            _postgres(args.postgres, root, ours)
        big_lines = args.big_mb * (1 << 20) // (len(LINE) + 1)
        anyio.run(_source, root / "big", 1, big_lines)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        ours = _timed(lambda: anyio.run(_copy, root / "big", root / "big-ours"))
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
        anchor = _timed(lambda: _anchor_copy(root / "big", root / "big-anchor"))
        print(
            f"one {args.big_mb} MB transcript: copy_sessions {ours:.2f} s, anchor {anchor:.2f} s, "
            f"ratio {ours / anchor:.2f}x; peak memory grew {grown_mb:.0f} MB"
        )


def _postgres(dsn: str, root: Path, dir_copy_s: float) -> None:
    """Import the sessions into a new schema and export them back, as ratios to the directory copy."""
    import psycopg  # the postgres extra, only for this part

    schema = f"sk_bench_transfer_{os.getpid()}"
    url = f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    try:
        imported = _timed(lambda: anyio.run(_copy, root / "src", url))
        exported = _timed(lambda: anyio.run(_copy, url, root / "from-pg"))
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    print(
        f"PostgreSQL: import {imported:.2f} s ({imported / dir_copy_s:.2f}x the directory copy), "
        f"export {exported:.2f} s ({exported / dir_copy_s:.2f}x)"
    )


if __name__ == "__main__":
    main()
