"""``sessionkeeper.abc``: the user-implemented protocols, one public path, the same objects as inside."""

from __future__ import annotations

import importlib

import pytest

import sessionkeeper
import sessionkeeper.abc
import sessionkeeper.compaction


# where the library itself uses each protocol (annotations and isinstance checks import from these)
_INTERNAL = {
    "ArchivingTranscriptStorage": "sessionkeeper.transcript._storage",
    "Clock": "sessionkeeper._clock",
    "CompactionClaimStorage": "sessionkeeper.transcript._storage",
    "CompactionProvider": "sessionkeeper.compaction._providers",
    "ModelClient": "sessionkeeper._model_client",
    "StoreBackend": "sessionkeeper.store._backend",
    "TokenCounter": "sessionkeeper._tokens",
    "TranscriptStorage": "sessionkeeper.transcript._storage",
    "WriterClaim": "sessionkeeper.transcript._storage",
}


def test_abc_exports_exactly_the_user_implemented_protocols() -> None:
    assert sorted(sessionkeeper.abc.__all__) == sorted(_INTERNAL)


@pytest.mark.parametrize("name", sorted(_INTERNAL))
def test_each_protocol_is_the_object_the_library_uses(name: str) -> None:
    public = getattr(sessionkeeper.abc, name)
    assert public is getattr(importlib.import_module(_INTERNAL[name]), name)
    assert public is getattr(sessionkeeper, name)


@pytest.mark.parametrize("name", sorted(_INTERNAL))
def test_each_protocol_names_its_public_module(name: str) -> None:
    public = getattr(sessionkeeper.abc, name)
    assert public.__module__ == "sessionkeeper.abc"
    assert repr(public) == f"<class 'sessionkeeper.abc.{name}'>"


class _UpperProvider:
    id = "upper"
    label = "Upper"

    async def summarize(self, request: sessionkeeper.compaction.SummaryRequest) -> str:
        return request.previous_summary or ""


def test_protocols_are_runtime_checkable_against_implementations() -> None:
    from sessionkeeper.store import InMemoryStoreBackend
    from sessionkeeper.testing import FakeClock, FakeTokenCounter, ScriptedModelClient

    assert isinstance(FakeClock(), sessionkeeper.abc.Clock)
    assert isinstance(FakeTokenCounter(), sessionkeeper.abc.TokenCounter)
    assert isinstance(ScriptedModelClient([]), sessionkeeper.abc.ModelClient)
    assert isinstance(_UpperProvider(), sessionkeeper.abc.CompactionProvider)
    assert isinstance(InMemoryStoreBackend(), sessionkeeper.abc.StoreBackend)
    assert not isinstance(object(), sessionkeeper.abc.Clock)
