"""
One worker process of the multi-process no-lost-update test (``test_store_multiprocess.py``).

``python _store_worker.py postgres|redis URL NAMESPACE WORKER KEYS UPDATES``: opens its own backend (its
own connection pool), prints ``ready``, waits for ``go`` on stdin, then runs ``UPDATES`` concurrent
updates, each appending ``"<worker>:<n>"`` to the ``marks`` list of one of ``KEYS`` shared keys, and prints
``done``.
"""

from __future__ import annotations

import asyncio
import sys

from sessionkeeper.store import (
    PostgresStoreBackend,
    RedisStoreBackend,
    SessionEntry,
    session_entry_from_dict,
    session_entry_to_dict,
)


def _add(mark: str):  # type: ignore[no-untyped-def]
    def fn(current: SessionEntry | None) -> SessionEntry:
        raw = session_entry_to_dict(current) if current is not None else {"sessionId": "shared", "marks": []}
        raw["marks"] = [*raw["marks"], mark]
        return session_entry_from_dict(raw)

    return fn


async def main(kind: str, url: str, namespace: str, *, worker: int, keys: int, updates: int) -> None:
    backend: PostgresStoreBackend | RedisStoreBackend
    if kind == "postgres":
        backend = PostgresStoreBackend(url, schema=namespace, max_size=4)
    else:
        backend = RedisStoreBackend(url, key_prefix=namespace)
    async with backend:
        await backend.keys()  # connected (and migrated) before the start signal
        print("ready", flush=True)
        line = await asyncio.to_thread(sys.stdin.readline)
        assert line.strip() == "go", line
        await asyncio.gather(
            *(backend.update(f"shared:{n % keys}", _add(f"{worker}:{n}")) for n in range(updates))
        )
    print("done", flush=True)


if __name__ == "__main__":
    kind, url, namespace, worker, keys, updates = sys.argv[1:]
    asyncio.run(main(kind, url, namespace, worker=int(worker), keys=int(keys), updates=int(updates)))
