"""
Rewrite the directive block of each API page (``docs/api/*.md``) from the public modules' ``__all__``.

Run after a public name was added, moved or removed (``tests/docs/test_docs_api.py`` fails and says so)::

    .venv/bin/python tests/docs/regen_api_pages.py

Only the ``eval-rst`` block at the end of each page is rewritten; the page's title, its task table and its
links are kept. Each name goes to its home module (``home_modules``): ``automodule`` with
``:exclude-members:`` for what is documented elsewhere, and one ``autodata`` per constant or type alias
(autodoc's ``automodule`` leaves out the data a package ``__init__`` imports; ``docs/conf.py`` finds their
docstrings).
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
API = REPO / "docs" / "api"

# the order decides the home of a name no module claims by ``__module__``: the first module exporting it
ORDER = (
    "sessionkeeper.exceptions",
    "sessionkeeper.records",
    "sessionkeeper.hooks",
    "sessionkeeper.abc",
    "sessionkeeper.transcript",
    "sessionkeeper.store.maintenance",
    "sessionkeeper.store",
    "sessionkeeper.pruning",
    "sessionkeeper.compaction",
    "sessionkeeper.runtime",
    "sessionkeeper.testing",
    "sessionkeeper.testing.conformance",
    "sessionkeeper.adapters",
    "sessionkeeper.adapters.openai",
    "sessionkeeper.adapters.anthropic",
    "sessionkeeper.adapters.openai_agents",
    "sessionkeeper.adapters.pydantic_ai",
    "sessionkeeper.openclaw",
    "sessionkeeper.cli",
    "sessionkeeper",
)

# page -> the modules it documents, in page order
PAGES = {
    "core": ("sessionkeeper",),
    "store": ("sessionkeeper.store", "sessionkeeper.store.maintenance"),
    "transcripts": ("sessionkeeper.records", "sessionkeeper.transcript"),
    "compaction": ("sessionkeeper.compaction",),
    "pruning": ("sessionkeeper.pruning",),
    "runtime": ("sessionkeeper.runtime",),
    "hooks": ("sessionkeeper.hooks", "sessionkeeper.abc"),
    "testing": ("sessionkeeper.testing", "sessionkeeper.testing.conformance"),
    "adapters": (
        "sessionkeeper.adapters",
        "sessionkeeper.adapters.openai",
        "sessionkeeper.adapters.anthropic",
        "sessionkeeper.adapters.openai_agents",
        "sessionkeeper.adapters.pydantic_ai",
    ),
    "openclaw": ("sessionkeeper.openclaw", "sessionkeeper.cli"),
    "exceptions": ("sessionkeeper.exceptions",),
}

EXTRA_OPTIONS = {
    "sessionkeeper.adapters.openai": (":inherited-members:",),
    "sessionkeeper.adapters.anthropic": (":inherited-members:",),
    "sessionkeeper.exceptions": (":show-inheritance:",),
}
NOT_DOCUMENTED = {("sessionkeeper", "exceptions"), ("sessionkeeper", "__version__")}  # a module; a str


def home_modules() -> dict[tuple[str, str], str]:
    """``(module, name) -> home module`` for every name of every public module's ``__all__``."""
    holders: dict[tuple[int, str], list[str]] = {}
    for module_name in ORDER:
        module = importlib.import_module(module_name)
        for member in module.__all__:
            holders.setdefault((id(getattr(module, member)), member), []).append(module_name)
    homes = {}
    for (_, member), modules in holders.items():
        obj = getattr(importlib.import_module(modules[0]), member)
        declared = getattr(obj, "__module__", None) if not isinstance(obj, str | int | float) else None
        home = declared if declared in modules else modules[0]
        for module_name in modules:
            homes[module_name, member] = home
    return homes


def _is_data(obj: object) -> bool:
    return not (inspect.isclass(obj) or inspect.isroutine(obj))


def directives(module_name: str, homes: dict[tuple[str, str], str]) -> str:
    """The autodoc directives documenting the names whose home is ``module_name``."""
    module = importlib.import_module(module_name)
    own = [
        m
        for m in module.__all__
        if homes[module_name, m] == module_name and (module_name, m) not in NOT_DOCUMENTED
    ]
    data = [m for m in own if _is_data(getattr(module, m))]
    lines = [f".. automodule:: {module_name}"]
    if module_name == "sessionkeeper":  # the facade: name its own few instead of excluding a hundred
        lines.append("   :members: " + ", ".join(m for m in own if m not in data))
    else:
        lines.append("   :members:")
    lines.append("   :undoc-members:")
    excluded = sorted({m for m in module.__all__ if m not in own} | set(data))
    if module_name != "sessionkeeper" and excluded:
        lines.append("   :exclude-members: " + ", ".join(excluded))
    lines += [f"   {option}" for option in EXTRA_OPTIONS.get(module_name, ())]
    for member in data:
        lines += ["", f".. autodata:: {module_name}.{member}"]
    return "\n".join(lines)


def render(page: str, homes: dict[tuple[str, str], str]) -> str:
    """The page's text with its directive block rewritten."""
    path = API / f"{page}.md"
    text = path.read_text(encoding="utf-8")
    block = "```{eval-rst}\n" + "\n\n".join(directives(m, homes) for m in PAGES[page]) + "\n```\n"
    head, found, _ = text.partition("```{eval-rst}\n")
    assert found, f"{path}: no eval-rst block"
    return head + block


def main() -> None:
    homes = home_modules()
    for page in PAGES:
        path = API / f"{page}.md"
        new = render(page, homes)
        if new != path.read_text(encoding="utf-8"):
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(REPO)}")
    assert re.search(r"api/core", (REPO / "docs" / "api.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
