"""
Live pi 1.6.0 oracle: our context equals pi 1.6.0's on every leaf of sessions it writes with its own
API (``make-session.mjs``, fresh ids and timestamps each run), and on every leaf of our pi 0.73.1 samples
(pi 1.6.0 reads them as 0.73.1 does).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests import _pi16_oracle
from tests._pi16_oracle import Pi16Oracle

from sessionkeeper.transcript import load_transcript


pytestmark = pytest.mark.oracle
pi16_oracle = _pi16_oracle.pi16_oracle


def _differing_leaves(oracle: Pi16Oracle, path: Path) -> tuple[int, list[str]]:
    """Compare every leaf in one batched call: ``(leaves compared, leaves whose context differs)``."""
    expected = oracle.context(path, all_leaves=True)
    index = load_transcript(path)
    assert sorted(expected) == sorted(e.id for e in index.entries())
    return len(expected), [
        leaf for leaf, ctx in expected.items() if index.build_context(leaf).to_json() != ctx
    ]


@pytest.mark.parametrize(
    ("shape", "seed", "entries"),
    [
        ("modern", 1, None),
        ("modern", 7, None),
        ("full", 3, None),
        ("branchy", 5, None),
        ("basic", 2, None),
        ("large", 11, 400),
    ],
)
def test_every_leaf_of_a_fresh_pi16_session_equals_pi16(
    pi16_oracle: Pi16Oracle, tmp_path: Path, shape: str, seed: int, entries: int | None
) -> None:
    path = pi16_oracle.make_session(tmp_path / f"{shape}.jsonl", shape=shape, seed=seed, entries=entries)
    compared, differing = _differing_leaves(pi16_oracle, path)
    assert compared >= 12
    assert differing == []


@pytest.mark.parametrize("name", ["basic", "full", "branchy"])
def test_pi16_reads_our_073_samples_as_we_do(pi16_oracle: Pi16Oracle, pi_samples: Path, name: str) -> None:
    """pi 1.6.0 gives the 0.73.1 samples the same context as 0.73.1 on every leaf, and so do we."""
    _, differing = _differing_leaves(pi16_oracle, pi_samples / f"{name}.jsonl")
    assert differing == []


def test_pi16_refuses_a_bom_that_we_read_leniently(
    pi16_oracle: Pi16Oracle, pi_samples: Path, tmp_path: Path
) -> None:
    """The documented disagreement on an old file (decision PI16-BOM): pi 1.6.0 refuses a UTF-8 BOM
    before the header (exit 2); pi 0.73.1 and sessionkeeper read the file."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (pi_samples / "basic.jsonl").read_bytes())
    with pytest.raises(_pi16_oracle.PiOracleError) as refused:
        pi16_oracle.context(path)
    assert refused.value.returncode == 2
    index = load_transcript(path)
    assert (
        index.build_context().to_json()
        == load_transcript(pi_samples / "basic.jsonl").build_context().to_json()
    )
