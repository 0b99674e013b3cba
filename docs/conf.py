"""Sphinx configuration for the sessionkeeper docs (MyST markdown + autodoc with napoleon)."""

from __future__ import annotations

from importlib.metadata import version as _version


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
exclude_patterns = ["_build"]
nitpicky = False
