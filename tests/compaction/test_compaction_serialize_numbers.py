"""pi §13.4: serializeConversation writes tool-call arguments with JSON.stringify (JS number forms)."""

from __future__ import annotations

from sessionkeeper.compaction import serialize_conversation
from sessionkeeper.transcript import AssistantMessage, ToolCall


def test_tool_call_arguments_use_javascript_number_forms() -> None:
    call = ToolCall(id="c1", name="tune", arguments={"ratio": 1e-7, "n": 2.0, "big": 1e21, "s": "\u00e9"})
    message = AssistantMessage(content=[call], api="a", provider="p", model="m", stop_reason="toolUse")
    text = serialize_conversation([message])
    assert 'tune(ratio=1e-7, n=2, big=1e+21, s="\u00e9")' in text
