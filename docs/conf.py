"""Sphinx configuration for the sessionkeeper docs (MyST markdown + autodoc with napoleon)."""

from __future__ import annotations

import sys
from importlib.metadata import version as _version
from pathlib import Path

from sphinx.application import Sphinx


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


def setup(app: Sphinx) -> dict[str, bool]:
    """Sphinx extension hook: render the diagrams before any page is read."""
    app.connect("builder-inited", _render_diagrams)
    return {"parallel_read_safe": True}
