"""
The transcript write lock (DESIGN D6, D8; OpenClaw spec §3): one ``<transcript>.lock`` file per
transcript, reentrant within a process, reclaimed from dead owners, released by a watchdog.

Modules: ``_settings`` (:class:`WriteLockSettings`), ``_local`` (locks and events usable from any
thread or event loop), ``_registry`` (what this process holds, the watchdog), ``_lock``
(:class:`SessionWriteLock`, :func:`run_locked`), ``_tools`` (:func:`is_locked`,
:func:`read_lock_owner`, :func:`clean_stale_lock_files`). The lock-file format and the staleness rules
live in the core's ``sessionkeeper._lockfile``. Public names are exported by
:mod:`sessionkeeper.transcript`.
"""

__all__ = ()
