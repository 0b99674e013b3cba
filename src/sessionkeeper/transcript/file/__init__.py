"""
Where a transcript's lines live on disk: the pi JSONL file (pi-format spec §1-2).

Modules: ``_io`` (exclusive create, appends, torn-tail repair, atomic rewrites, the inline-write
gate), ``_follow`` (picking up other writers' lines), ``_tail`` (reads from the end), ``_sidecar`` and
``_sidecar_build`` (the ancestry index next to a transcript), ``_index_cache`` (loaded indexes reused
while a file only grows), ``_listing`` (a sessions directory's transcripts). Public names are
exported by :mod:`sessionkeeper.transcript`.
"""

__all__ = ()
