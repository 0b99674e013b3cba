"""Sphinx configuration for the sessionkeeper docs (MyST markdown + autodoc with napoleon)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from importlib.metadata import version as _version
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer


_DOCS = Path(__file__).resolve().parent


project = "sessionkeeper"
author = "sessionkeeper developers"
copyright = "2026, sessionkeeper developers"  # noqa: A001 - Sphinx's name
release = _version("sessionkeeper")
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3  # GitHub-style #slug links to headings, as the guides use (page.md#several-writers)
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_use_ivar = True
exclude_patterns = ["_build", "_diagrams", "_generated"]
nitpicky = False


def _render_diagrams(app: Sphinx) -> None:
    """Draw the concept diagrams (docs/concepts.md) from sessions built with the library, into _generated/."""
    sys.path.insert(0, str(_DOCS / "_diagrams"))
    try:
        from render import render_all  # docs/_diagrams/render.py

        render_all(_DOCS / "_generated")
    finally:
        sys.path.remove(str(_DOCS / "_diagrams"))


def _defining_module(package: str, attr: str) -> str | None:
    """The module a package ``__init__`` imports ``attr`` from (``from ._x import attr``), read from its source."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return None
    for node in ast.walk(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and any(alias.name == attr for alias in node.names):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            return f"{base}.{node.module}" if node.level else node.module
    return None


def _data_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """
    A re-exported constant or type alias gets the docstring written under it where it is defined.

    autodoc looks for a data item's docstring in the module named by the directive (the package
    ``__init__``, which only imports it), then falls back to the docstring of the value's type (``dict``'s
    for a dict). Both are wrong: take the attribute docstring of the defining module instead, else none.
    """
    if what != "data":
        return
    package, _, attr = name.rpartition(".")
    module = _defining_module(package, attr)
    docs = ModuleAnalyzer.for_module(module).find_attr_docs() if module else {}
    lines[:] = list(docs.get(("", attr), []))


def setup(app: Sphinx) -> dict[str, bool]:
    """Sphinx extension hook: render the diagrams before any page is read; document re-exported data."""
    app.connect("builder-inited", _render_diagrams)
    app.connect("autodoc-process-docstring", _data_docstring)
    return {"parallel_read_safe": True}
