"""
The pi 0.73.1 oracle for tests: runs the real ``@mariozechner/pi-coding-agent`` on our files.

Use the session-scoped ``pi_oracle`` fixture::

    from tests._pi_oracle import PiOracle, pi_oracle  # noqa: F401  (fixture import)

    @pytest.mark.oracle
    def test_x(pi_oracle: PiOracle, tmp_path): ...

The fixture finds ``node``/``npm`` (skips with the reason when absent or when ``shared/`` is missing),
copies ``shared/tools/pi-oracle`` to ``~/.cache/sessionkeeper/pi-oracle-<package-lock sha256[:16]>``
(``$SESSIONKEEPER_ORACLE_CACHE`` overrides the cache root) and runs ``npm ci`` there once, when
``node_modules`` is missing. ``$SESSIONKEEPER_PI_ORACLE_DIR`` may name a ready installed copy instead.
Calls are batched: one ``context.mjs`` run answers every leaf (``--all-leaves``) or the meta and cut
point of the current leaf.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


__all__ = ("PiOracle", "PiOracleError", "find_oracle", "find_pi_oracle", "pi_oracle")

_NPM_TIMEOUT_S = 600
_CALL_TIMEOUT_S = 120


class PiOracleError(RuntimeError):
    """A ``context.mjs`` / ``bench.mjs`` call failed (exit status and stderr attached)."""

    def __init__(self, message: str, *, returncode: int, stderr: str) -> None:
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"{message} (exit {returncode}): {stderr.strip()}")


class PiOracle:
    """A ready pi-oracle folder and the ``node`` binary to run its scripts."""

    def __init__(self, root: Path, node: str) -> None:
        self.root = root
        self.node = node

    def run(self, script: str, *args: str, timeout: float = _CALL_TIMEOUT_S) -> str:
        """Run ``node <root>/<script> args...`` and return stdout; raise :class:`PiOracleError` on failure."""
        proc = subprocess.run(
            [self.node, str(self.root / script), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            check=False,
        )
        if proc.returncode != 0:
            raise PiOracleError(f"{script} failed", returncode=proc.returncode, stderr=proc.stderr)
        return proc.stdout

    def context(
        self,
        file: Path,
        *,
        leaf: str | None = None,
        all_leaves: bool = False,
        meta: bool = False,
        llm: bool = False,
        cut_point: int | None = None,
        migrated_out: Path | None = None,
    ) -> dict[str, Any]:
        """
        ``context.mjs FILE`` (on a temporary copy: the input is never modified) as parsed JSON.

        Args:
            file: The session file.
            leaf: ``--leaf ID`` (``"null"`` for before the first entry).
            all_leaves: ``--all-leaves``: ``{entryId: context}`` for every entry.
            meta: ``--meta``: header, labels, name, branch ids, estimates, context tokens.
            llm: ``--llm``: adds ``llmMessages``.
            cut_point: ``--cut-point N``: pi's ``findCutPoint`` with ``keepRecentTokens = N``.
            migrated_out: ``--migrated-out P``: the file as pi rewrites it after loading.
        """
        args = [str(file)]
        if leaf is not None:
            args += ["--leaf", leaf]
        if all_leaves:
            args.append("--all-leaves")
        if meta:
            args.append("--meta")
        if llm:
            args.append("--llm")
        if cut_point is not None:
            args += ["--cut-point", str(cut_point)]
        if migrated_out is not None:
            args += ["--migrated-out", str(migrated_out)]
        result: dict[str, Any] = json.loads(self.run("context.mjs", *args))
        return result

    def bench(self, file: Path, *, repeat: int = 5) -> dict[str, Any]:
        """``bench.mjs FILE --repeat N``: pi's in-process open/context timings and peak RSS."""
        result: dict[str, Any] = json.loads(
            self.run("bench.mjs", str(file), "--repeat", str(repeat), timeout=_NPM_TIMEOUT_S)
        )
        return result


def _shared_dir() -> Path | None:
    """shared/ as ``tests/conftest.py`` finds it: ``$SESSIONKEEPER_SHARED`` or ``../shared``."""
    env = os.environ.get("SESSIONKEEPER_SHARED")
    candidate = Path(env) if env else Path(__file__).resolve().parent.parent.parent / "shared"
    return candidate if candidate.is_dir() else None


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def find_pi_oracle() -> PiOracle | str:
    """Return a ready :class:`PiOracle`, or the reason why none is available."""
    return find_oracle("pi-oracle", "SESSIONKEEPER_PI_ORACLE_DIR")


def find_oracle(tool: str, ready_env: str) -> PiOracle | str:
    """
    Return a ready oracle for ``shared/tools/<tool>`` (installed once into the cache, keyed by its
    ``package-lock.json``), or the reason why none is available. ``$<ready_env>`` may name a ready copy.
    """
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        return f"node/npm not found on PATH: the {tool} oracle cannot run"
    ready = os.environ.get(ready_env)
    if ready:
        root = Path(ready)
        if (root / "node_modules").is_dir() and (root / "context.mjs").is_file():
            return PiOracle(root, node)
        return f"${ready_env}={ready} has no installed {tool}"
    shared = _shared_dir()
    source = shared / "tools" / tool if shared is not None else None
    if source is None or not (source / "package-lock.json").is_file():
        return f"shared/tools/{tool} not found (set $SESSIONKEEPER_SHARED)"
    digest = hashlib.sha256((source / "package-lock.json").read_bytes()).hexdigest()[:16]
    cache_root = Path(os.environ.get("SESSIONKEEPER_ORACLE_CACHE", Path.home() / ".cache" / "sessionkeeper"))
    root = cache_root / f"{tool}-{digest}"
    with _file_lock(cache_root / f"{tool}-{digest}.lock"):
        if not (root / "node_modules").is_dir():
            staging = cache_root / f"{tool}-{digest}.staging"
            shutil.rmtree(staging, ignore_errors=True)
            shutil.copytree(source, staging)
            for item in staging.rglob("*"):
                item.chmod(0o700 if item.is_dir() else 0o600)
            staging.chmod(0o700)
            proc = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"],
                cwd=staging,
                capture_output=True,
                text=True,
                timeout=_NPM_TIMEOUT_S,
                check=False,
            )
            if proc.returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                return f"npm ci for the {tool} oracle failed: {proc.stderr.strip()[-500:]}"
            shutil.rmtree(root, ignore_errors=True)
            staging.rename(root)
    return PiOracle(root, node)


@pytest.fixture(scope="session")
def pi_oracle() -> PiOracle:
    """The pi 0.73.1 oracle (skips the test with a clear reason when node/npm or shared/ is absent)."""
    found = find_pi_oracle()
    if isinstance(found, str):
        pytest.skip(found)
    return found
