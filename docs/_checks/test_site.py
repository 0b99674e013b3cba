"""
Checks of the built docs site (issue #17): links, the API inventory, and the rendered tutorial page.

Run after the Sphinx build, on its output (``.ci/run`` and ``nox -s docs`` do)::

    SESSIONKEEPER_DOCS_HTML=<html dir> python -m pytest -q docs/_checks

Without ``SESSIONKEEPER_DOCS_HTML`` the fixture builds the site first (``sphinx-build -W``, the ``docs``
extra). Not under ``tests/``: the main suite does not install Sphinx or a browser. The screenshot test uses
Debian's ``chromium`` (``.ci/run`` installs it when it is missing).

- Internal links: every ``href`` and ``src`` to a page, a file or an ``#anchor`` of the site resolves
  (Sphinx's ``linkcheck`` builder fetches external links, which this machine cannot; external links are
  only listed, in ``external-links.txt`` beside the HTML).
- API inventory: every public name of every public module is in ``objects.inv`` (autodoc skips silently
  what it cannot document), under its home module (``tests/docs/test_docs_api.py``).
- Screenshot: headless Chromium renders the agent-loop tutorial; its DOM holds the page's main elements and
  the PNG is a non-blank picture of the page.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("SESSIONKEEPER_DOCS_HTML")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("html")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            str(REPO / "docs"),
            str(out),
        ],
        check=True,
    )
    return out


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id", "name"):
            if values.get(key):
                self.ids.add(str(values[key]))
        for key in ("href", "src"):
            if values.get(key) and tag in ("a", "img", "link", "script"):
                self.links.append(str(values[key]))


def _pages(site: Path) -> dict[str, _Page]:
    pages = {}
    for path in sorted(site.rglob("*.html")):
        parser = _Page()
        parser.feed(path.read_text(encoding="utf-8"))
        pages[path.relative_to(site).as_posix()] = parser
    return pages


def test_internal_links_and_anchors_resolve(site: Path) -> None:
    pages = _pages(site)
    assert "tutorial_agent_loop.html" in pages and "api/store.html" in pages
    broken, external = [], set()
    for name, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme in ("http", "https", "mailto"):
                external.add(link)
                continue
            assert not parts.scheme, f"{name}: unexpected link {link}"
            target = (
                posixpath.normpath(posixpath.join(posixpath.dirname(name), unquote(parts.path)))
                if parts.path
                else name
            )
            if not (site / target).exists():
                broken.append(f"{name} -> {link} (no file {target})")
            elif parts.fragment and target.endswith(".html") and parts.fragment not in pages[target].ids:
                broken.append(f"{name} -> {link} (no #{parts.fragment} in {target})")
    assert broken == [], "broken internal links:\n" + "\n".join(broken)
    (site / "external-links.txt").write_text(
        "".join(f"{url}\n" for url in sorted(external)), encoding="utf-8"
    )


def test_every_public_name_is_in_the_inventory(site: Path) -> None:
    from sphinx.util.inventory import InventoryFile

    sys.path.insert(0, str(REPO))
    from tests.docs.test_docs_api import _homes

    with (site / "objects.inv").open("rb") as f:
        inventory = InventoryFile.load(f, "", posixpath.join)
    items = (
        inventory.items() if hasattr(inventory, "items") else inventory.data.items()
    )  # Sphinx < 8.2 / >= 8.2
    documented = {name for kind, objects in items if kind.startswith("py:") for name in objects}
    missing = sorted(f"{module}.{name}" for module, name in _homes() if f"{module}.{name}" not in documented)
    assert missing == [], f"public names missing from the built API reference: {missing}"


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Debian's chromium is needed (apt-get install -y chromium; .ci/run installs it)"
    return found


def _run_chromium(*args: str) -> str:
    base = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    done = subprocess.run([*base, *args], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def _png_rows(data: bytes) -> Iterator[bytes]:
    """The decoded scanlines of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw, stride, previous = zlib.decompress(idat), width * bpp, bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - bpp] if x >= bpp else 0
            up, corner = previous[x], previous[x - bpp] if x >= bpp else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        previous = line
        yield bytes(line[i] for i in range(stride) if i % bpp < 3)  # RGB only


def test_tutorial_page_renders_with_its_main_elements(site: Path, tmp_path: Path) -> None:
    page = (site / "tutorial_agent_loop.html").as_uri()
    dom = _run_chromium("--dump-dom", page)
    assert "<h1>Tutorial: an agent loop that keeps its context small" in dom
    for heading in (
        "1. A model on loopback",
        "2. A store, a client and a runtime",
        "3. The loop",
        "4. Nine turns",
    ):
        assert heading in dom, heading
    assert dom.count('class="highlight-python') >= 6  # the runnable blocks, highlighted
    assert 'href="tutorial_plugin.html"' in dom and 'href="concepts.html"' in dom  # next steps and the nav
    shot = tmp_path / "tutorial.png"
    _run_chromium(f"--screenshot={shot}", "--window-size=1200,1600", page)
    rows = list(_png_rows(shot.read_bytes()))
    assert len(rows) == 1600
    pixels = [row[i : i + 3] for row in rows[::8] for i in range(0, len(row), 24)]
    dark = sum(1 for p in pixels if sum(p) < 300)  # text
    assert dark / len(pixels) > 0.005, "the screenshot shows no text"
    assert len(set(pixels)) > 20, "the screenshot is (almost) one colour"
    shutil.copy(shot, site / "_tutorial_screenshot.png")
