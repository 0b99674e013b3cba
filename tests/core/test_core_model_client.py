"""ModelRequest / ModelResponse value objects and the ModelClient protocol."""

from __future__ import annotations

import anyio
import attrs
import pytest

from sessionkeeper._model_client import ModelClient, ModelRequest, ModelResponse
from sessionkeeper.records._messages import Usage, UserMessage


def test_request_is_frozen_keyword_only_with_defaults() -> None:
    request = ModelRequest(
        system_prompt="sys", messages=[UserMessage(content="hi", timestamp=1)], max_tokens=10
    )
    assert request.messages == (UserMessage(content="hi", timestamp=1),)
    assert request.model is None
    assert request.thinking_level is None
    assert request.abort is None
    assert dict(request.metadata) == {}
    assert not request.aborted
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        request.max_tokens = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        ModelRequest("sys", (), 10)  # type: ignore[misc]


def test_metadata_is_copied_read_only() -> None:
    source = {"purpose": "compaction"}
    request = ModelRequest(system_prompt="s", messages=(), max_tokens=1, metadata=source)
    source["purpose"] = "changed"
    assert request.metadata["purpose"] == "compaction"
    with pytest.raises(TypeError):
        request.metadata["x"] = "y"  # type: ignore[index]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_max_tokens_must_be_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        ModelRequest(system_prompt="s", messages=(), max_tokens=bad)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_abort_event_and_protocol() -> None:
    abort = anyio.Event()
    request = ModelRequest(system_prompt="s", messages=(), max_tokens=5, abort=abort)
    assert not request.aborted
    abort.set()
    assert request.aborted

    class Echo:
        async def complete(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(text=request.system_prompt, usage=Usage(input=1, output=2))

    client: ModelClient = Echo()
    assert isinstance(client, ModelClient)
    response = await client.complete(request)
    assert response.text == "s"
    assert response.stop_reason == "stop"
    assert response.model is None
    assert response.usage == Usage(input=1, output=2)
