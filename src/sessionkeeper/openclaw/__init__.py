"""
OpenClaw 2026.8+ agent databases (``agents/<agentId>/agent/openclaw-agent.sqlite``), read-only.

:func:`read_agent_database` reads the sessions and their current transcripts of every agent schema in
:data:`SUPPORTED_SCHEMA_VERSIONS` (zstd rows included); :func:`import_openclaw_database` writes them as a
legacy sessions directory (``sessions.json`` + JSONL) equal to OpenClaw 2026.9.6's own legacy bridge.
``docs/openclaw_import.md`` is the guide; ``../shared/tools/openclaw9-oracle/README.md`` the format.
"""

from __future__ import annotations

from sessionkeeper.openclaw._export import ImportReport, import_openclaw_database, write_sessions_dir
from sessionkeeper.openclaw._reader import (
    SUPPORTED_SCHEMA_VERSIONS,
    AgentDatabase,
    AgentSession,
    read_agent_database,
)


__all__ = (
    "SUPPORTED_SCHEMA_VERSIONS",
    "AgentDatabase",
    "AgentSession",
    "ImportReport",
    "import_openclaw_database",
    "read_agent_database",
    "write_sessions_dir",
)


from sessionkeeper._public import set_public_module


set_public_module(globals())
