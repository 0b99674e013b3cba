"""Shared fixtures: paths to the samples, the shared/ folder, anyio backends, slow-test opt-in."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings


REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
PI_SAMPLES = DATA / "pi"
PI16_SAMPLES = DATA / "pi16"
OPENCLAW_SAMPLES = DATA / "openclaw"

settings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def shared_dir() -> Path | None:
    """The workplace's shared/ folder (``$SESSIONKEEPER_SHARED`` or ``../shared``), if present."""
    env = os.environ.get("SESSIONKEEPER_SHARED")
    candidate = Path(env) if env else REPO.parent / "shared"
    return candidate if candidate.is_dir() else None


def pytest_configure(config: pytest.Config) -> None:
    """
    Keep the suite out of the user's cache: the tail reader persists ancestry indexes under
    ``$SESSIONKEEPER_CACHE_DIR`` (default ``~/.cache/sessionkeeper``), so every test run, and every CLI
    subprocess it starts, gets a fresh temporary cache dir (unless the caller set one).
    """
    if "SESSIONKEEPER_CACHE_DIR" not in os.environ:
        os.environ["SESSIONKEEPER_CACHE_DIR"] = tempfile.mkdtemp(prefix="sessionkeeper-test-cache-")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="run long fault-injection/scale tests")
    parser.addoption("--run-openclaw-live", action="store_true", help="call OpenClaw's oracle live")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow test: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=[pytest.param("asyncio", id="asyncio"), pytest.param("trio", id="trio")])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def pi_samples() -> Path:
    return PI_SAMPLES


@pytest.fixture
def pi16_samples() -> Path:
    """Sessions pi 1.6.0 wrote, with its goldens (copied from ``shared/samples/pi16``)."""
    return PI16_SAMPLES


@pytest.fixture
def openclaw_samples() -> Path:
    return OPENCLAW_SAMPLES
