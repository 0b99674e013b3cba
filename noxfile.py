"""nox sessions: tests, typecheck (mypy --strict), pyright, lint (ruff), docs, benchmarks, oracle fixtures."""

from __future__ import annotations

import nox


nox.options.error_on_external_run = True
nox.options.sessions = ("tests", "typecheck", "pyright", "lint")

PYTHONS = ["3.11"]  # the only interpreter on our machines; pyproject declares >=3.11


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Run the test suite (pi oracle interop tests included when node/npm are present)."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHONS)
def adapters_oldest(session: nox.Session) -> None:
    """The adapter tests against the oldest SDKs the ``openai`` / ``anthropic`` extras allow."""
    session.install("-e", ".[test]")
    session.install("openai==1.66.0", "anthropic==0.47.0")
    clients = ("test_adapters_clients.py", "test_adapters_runtime.py", "test_adapters_examples.py")
    session.run("pytest", "-q", *(f"tests/adapters/{name}" for name in clients), *session.posargs)


@nox.session(python=PYTHONS)
def pydantic_ai_oldest(session: nox.Session) -> None:
    """The pydantic-ai glue against the oldest pydantic-ai-slim the ``pydantic-ai`` extra allows."""
    session.install("-e", ".[test]")
    session.install("pydantic-ai-slim==2.0.0")
    tests = ("test_adapters_pydantic_ai.py", "test_adapters_pydantic_ai_convert.py", "test_adapters_docs.py")
    session.run("pytest", "-q", *(f"tests/adapters/{name}" for name in tests), *session.posargs)


@nox.session(python=PYTHONS)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package and the typing tests (tests/typing), settings in pyproject.toml."""
    session.install("-e", ".[dev]")
    session.run("mypy")


@nox.session(python=PYTHONS)
def pyright(session: nox.Session) -> None:
    """pyright on the package and the typing tests, then the public API's type completeness (100%)."""
    session.install("-e", ".[dev]")
    session.run("pyright", "-p", ".")
    session.run("pyright", "--verifytypes", "sessionkeeper", "--ignoreexternal")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    session.install("ruff")
    session.run("ruff", "check", "src", "tests", "benchmarks")
    session.run("ruff", "format", "--check", "src", "tests", "benchmarks")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx docs, warnings as errors, then check the site (links, API inventory, screenshot)."""
    session.install("-e", ".[dev,docs]")  # the adapter pages import their SDKs
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", "docs/_build/html")
    session.run("python", "-m", "pytest", "-q", "docs/_checks", env={"SESSIONKEEPER_DOCS_HTML": "docs/_build/html"})


@nox.session(python=PYTHONS)
def benchmarks(session: nox.Session) -> None:
    """Run the benchmarks (side by side with the pi oracle where node is available)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "benchmarks", *session.posargs)


@nox.session(python=PYTHONS)
def oracle_live(session: nox.Session) -> None:
    """Opt-in: run the tests that call OpenClaw's oracle live (about 560 MB of npm packages)."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "oracle", "--run-openclaw-live", *session.posargs)
