"""The guides as a new user reads them: links resolve, imports exist, the CLI table is complete."""

from __future__ import annotations

import ast
import importlib
import re
import unicodedata
from pathlib import Path

import click
import pytest

from sessionkeeper.cli._main import cli


DOCS = Path(__file__).resolve().parent.parent.parent / "docs"
GUIDES = sorted(DOCS.glob("*.md"))


def _slug(title: str) -> str:
    """MyST's GitHub-style heading slug (``myst_heading_anchors``)."""
    text = unicodedata.normalize("NFKC", title).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _headings(page: Path) -> dict[str, int]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    found: dict[str, int] = {}
    for hashes, title in re.findall(r"^(#{1,6}) +(.+?) *$", text, flags=re.MULTILINE):
        found.setdefault(_slug(title.replace("`", "")), len(hashes))
    return found


def test_heading_links_resolve_in_the_sphinx_build() -> None:
    # `sphinx-build -W` failed: myst did not make heading anchors, so page.md#several-writers was a warning.
    conf = (DOCS / "conf.py").read_text(encoding="utf-8")
    depth = re.search(r"^myst_heading_anchors\s*=\s*(\d+)", conf, flags=re.MULTILINE)
    assert depth is not None, "docs/conf.py must set myst_heading_anchors for the guides' #anchor links"
    for page in GUIDES:
        for target, anchor in re.findall(r"\]\(([\w-]*\.md)?#([\w-]+)\)", page.read_text(encoding="utf-8")):
            headings = _headings(DOCS / target if target else page)
            assert anchor in headings, f"{page.name}: no heading for #{anchor} in {target or page.name}"
            assert headings[anchor] <= int(depth.group(1)), f"{page.name}: #{anchor} is too deep"


def _python_blocks() -> list[tuple[str, str]]:
    return [
        (page.name, block)
        for page in GUIDES
        for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    ]


@pytest.mark.parametrize(("page", "block"), _python_blocks(), ids=lambda v: v if v.endswith(".md") else "")
def test_every_name_a_guide_imports_exists(page: str, block: str) -> None:
    tree = ast.parse(block.replace("await ", "").replace("async with", "with"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sessionkeeper"):
            module = importlib.import_module(node.module)
            missing = [alias.name for alias in node.names if not hasattr(module, alias.name)]
            assert not missing, f"{page}: {node.module} has no {missing}"


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the root group loads its commands lazily
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            found += _commands(command, f"{prefix}{name} ")
        else:
            found.append((f"{prefix}{name}", command))
    return found


@pytest.mark.parametrize(("name", "command"), _commands(cli), ids=lambda v: v if isinstance(v, str) else "")
def test_cli_page_lists_every_option_of_every_command(name: str, command: click.Command) -> None:
    lines = (DOCS / "cli.md").read_text(encoding="utf-8").splitlines()
    rows = [line for line in lines if line.startswith("| `")]
    row = next((r for r in rows if r.startswith(f"| `{name} ")), None)
    assert row is not None, f"docs/cli.md has no row for `{name}`"
    usage = row.split("`")[1]
    for param in command.params:
        if isinstance(param, click.Option) and "--help" not in param.opts:
            listed = any(re.search(rf"{re.escape(opt)}\b", usage) for opt in param.opts)
            assert listed, f"docs/cli.md: `{name}` does not list {param.opts}"
