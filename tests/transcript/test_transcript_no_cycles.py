"""
A closed transcript is freed by reference counting alone (issue 16, "No reference cycles").

The loaded index and the loader's scan record used to point at each other, so every open/close left
the whole index (about +30 MB for the 18.5 MB sample) to the cyclic GC. A gateway that opens many
transcripts with the GC tuned down (or disabled) then grew without bound.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
from pathlib import Path

import anyio

from sessionkeeper.transcript import TranscriptManager, load_transcript


SAMPLE = Path(__file__).resolve().parent.parent / "data" / "pi" / "large-2000.jsonl"

_PROBE = """
import gc, json, sys, weakref
import anyio
from sessionkeeper.transcript import TranscriptManager, load_transcript

path = sys.argv[1]

def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0

async def cycle():
    manager = await TranscriptManager.open(path)
    manager.build_session_context()
    manager.diagnostics
    ref = weakref.ref(manager.index)
    del manager
    index = load_transcript(path)
    index.build_context()
    index.diagnostics
    ref2 = weakref.ref(index)
    del index
    return ref, ref2

gc.collect()
gc.disable()
freed = []
samples = []
for round_no in range(50):
    refs = anyio.run(cycle)  # the worker thread may hold the last result until the loop ends
    freed.append(all(ref() is None for ref in refs))
    if round_no in (4, 49):
        samples.append(rss_kb())
print(json.dumps({"freed": all(freed), "growth_kb": samples[1] - samples[0]}))
"""


def test_open_close_cycles_keep_rss_flat_with_gc_disabled() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(SAMPLE)], check=True, capture_output=True, text=True, timeout=300
    ).stdout
    result = json.loads(out)
    assert result["freed"], "a closed transcript's index stayed alive without the cyclic GC"
    # One open of the 1.8 MB sample holds a few MB; 45 leaked opens would be well over 100 MB.
    assert result["growth_kb"] < 16 * 1024, result


def _no_garbage_of(kinds: tuple[str, ...]) -> list[str]:
    gc.collect()
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = [type(obj).__name__ for obj in gc.garbage if type(obj).__name__ in kinds]
    finally:
        gc.garbage.clear()
        gc.set_debug(flags)
    return found


def test_loaded_index_dies_without_the_cyclic_gc() -> None:
    async def open_and_drop() -> weakref.ref[object]:
        manager = await TranscriptManager.open(SAMPLE)
        manager.build_session_context()
        assert manager.diagnostics.line_count > 0
        await manager.refresh()
        ref: weakref.ref[object] = weakref.ref(manager.index)
        return ref

    gc.collect()
    gc.disable()
    try:
        index = load_transcript(SAMPLE)
        index.build_context()
        assert index.diagnostics.line_count > 0
        ref = weakref.ref(index)
        del index
        assert ref() is None
        assert anyio.run(open_and_drop)() is None
        assert _no_garbage_of(("TranscriptIndex", "_Scan")) == []
    finally:
        gc.enable()
