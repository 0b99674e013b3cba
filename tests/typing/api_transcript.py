"""Typing tests of transcripts: open/create, append, context rebuild (checked, never run)."""

from __future__ import annotations

from pathlib import Path
from typing import assert_type

import msgspec

from sessionkeeper import SessionContext, TranscriptEntry, TranscriptManager, UserMessage
from sessionkeeper.abc import ArchivingTranscriptStorage, TranscriptStorage, WriterClaim
from sessionkeeper.records import AgentMessage, AssistantMessage, MessageEntry, entry_from_line
from sessionkeeper.transcript import MemoryTranscriptStorage, TranscriptArchive, create_transcript_lines


async def transcript_calls(message: AgentMessage) -> None:
    assert_type(await TranscriptManager.open("s.jsonl"), TranscriptManager)
    assert_type(await TranscriptManager.create(Path("s.jsonl"), cwd="/work"), TranscriptManager)
    assert_type(create_transcript_lines("s", now_ms=0, cwd="/work"), list[bytes])
    transcript = TranscriptManager.in_memory(cwd="/work")
    assert_type(transcript, TranscriptManager)
    assert_type(await transcript.append_message(message), MessageEntry)
    user = UserMessage(content="hi", timestamp=1)
    assert_type(await transcript.append_messages([user, message]), list[MessageEntry])
    assert_type(transcript.build_session_context(), SessionContext)
    assert_type(transcript.build_session_context(None), SessionContext)
    assert_type(transcript.build_session_context(msgspec.UNSET), SessionContext)
    assert_type(transcript.get_entry("a1b2c3d4"), TranscriptEntry | None)
    assert_type(transcript.entries(), list[TranscriptEntry])
    assert_type(transcript.leaf_id, str | None)
    assert_type(transcript.path, Path | None)
    assert_type(transcript.storage, TranscriptStorage | None)
    assert_type(await MemoryTranscriptStorage().claim_compaction("s"), WriterClaim | None)
    archiving: ArchivingTranscriptStorage = MemoryTranscriptStorage()
    archived = await archiving.archive("s", reason="reset", now_ms=0)
    assert_type(archived, TranscriptArchive | None)
    assert_type(await archiving.list_archives(), list[TranscriptArchive])
    assert_type(await archiving.delete_archive("s/reset/x"), bool)


def context_fields(context: SessionContext) -> None:
    assert_type(context.messages, tuple[AgentMessage, ...])
    assert_type(context.thinking_level, str)


def user_message_fields(message: UserMessage) -> None:
    assert_type(message.timestamp, int | float)


def decoded_records(line: bytes, reply: AssistantMessage) -> None:
    assert_type(entry_from_line(line), TranscriptEntry)
    assert_type(reply.timestamp, int | float)
