"""
Regenerate the OpenClaw hygiene fixtures in tests/data/oracle (hygiene-cases.json, hygiene-results.json.gz).

Runs ``tests/pruning/hygiene_oracle.mjs`` (OpenClaw 2026.7.35's own ``repairToolUseResultPairing``,
``sanitizeToolCallInputs``, ``sanitizeToolCallIdsForCloudCodeAssist``, ``validateAnthropicTurns``,
``validateGeminiTurns`` and ``sanitizeGoogleTurnOrdering``, loaded from the installed oracle) on the
crafted cases of :func:`cases`. Usage::

    python tests/pruning/regen_hygiene_fixtures.py [--oracle /tmp/openclaw-oracle]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sessionkeeper.pruning import make_missing_tool_result
from sessionkeeper.records._messages import TextContent, ToolCall
from sessionkeeper.transcript import message_to_builtins


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.pruning._builders import assistant, call, result, thinking, user  # noqa: E402


OUT = HERE.parents[1] / "tests" / "data" / "oracle"
PI = HERE.parents[1] / "tests" / "data" / "pi"
NOW = 1_800_000_000_000


def cases() -> list[dict[str, Any]]:
    """The crafted hygiene cases: ``{name, step, messages, options}`` (messages as pi JSON)."""
    synthetic = make_missing_tool_result("a", tool_name="read", timestamp_ms=NOW - 5)
    raw: list[tuple[str, str, list[Any], dict[str, Any]]] = [
        (
            "b06b-dangling",
            "pairing",
            [
                user("x" * 600),
                user("Archive the old reports."),
                assistant(call("call_z", "archive", dir="r")),
                user("?"),
            ],
            {},
        ),
        (
            "displaced",
            "pairing",
            [user(), assistant(call("a"), call("b")), user("mid"), result("b", "B"), result("a", "A")],
            {},
        ),
        (
            "duplicates",
            "pairing",
            [user(), assistant(call("a")), result("a", "real"), result("a", "again")],
            {},
        ),
        (
            "synthetic-replaced",
            "pairing",
            [user(), assistant(call("a")), synthetic, user("later"), result("a", "real")],
            {},
        ),
        (
            "pulled-forward-orphans",
            "pairing",
            [
                result("zz", "orphan at start"),
                user(),
                assistant(call("a")),
                assistant(call("b")),
                result("b", "B"),
                result("a", "A late"),
                result("nobody", "orphan"),
            ],
            {},
        ),
        (
            "legacy-id",
            "pairing",
            [user(), assistant(call("a", "grep")), result("", "found", name="grep")],
            {},
        ),
        (
            "errored-keep",
            "pairing",
            [user(), assistant(call("a"), call("b"), stop="error"), result("a", "A"), user("n")],
            {},
        ),
        (
            "errored-drop",
            "pairing",
            [user(), assistant(call("a"), call("b"), stop="error"), result("a", "A"), user("n")],
            {"erroredAssistantResultPolicy": "drop"},
        ),
        (
            "responses-aborted",
            "pairing",
            [user(), assistant(call("call_1|fc_1")), user("?")],
            {"erroredAssistantResultPolicy": "drop", "missingToolResultText": "aborted"},
        ),
        ("well-paired", "pairing", [user(), assistant(call("a")), result("a", "A"), assistant("done")], {}),
        (
            "assistant-between",
            "pairing",
            [user(), assistant(call("a")), assistant("thinking aloud"), result("a", "A")],
            {},
        ),
        (
            "repeated-id",
            "pairing",
            [user(), assistant(call("a")), result("a", "1"), assistant(call("a"))],
            {},
        ),
        (
            "blank-tool-name",
            "pairing",
            [user(), assistant(call("a", "read")), result("a", "A", name="  ")],
            {},
        ),
        (
            "inputs",
            "toolInputs",
            [
                user(),
                assistant("keep", call("", "read"), call("a", " read "), call("b", "bad name")),
                assistant(call("c", "nope")),
                assistant(call("d", "Read")),
            ],
            {"allowedToolNames": ["READ", " "]},
        ),
        (
            "inputs-signed-thinking",
            "toolInputs",
            [
                user(),
                assistant(thinking("t", "sig"), call("t1", "read"), call("t2", "grep")),
                result("t1", "1"),
                result("t2", "2"),
                assistant(thinking("u", "sig"), call("u1", " read ")),
                result("u1", "1"),
                assistant(thinking("v", "sig"), call("t1", "read")),
                assistant(thinking("w", "sig"), call("w1", "read"), call("w1", "read")),
                assistant(call("x1", " read ")),
            ],
            {"allowProviderOwnedThinkingReplay": True},
        ),
        (
            "inputs-no-allowlist",
            "toolInputs",
            [user(), assistant(call("a", "x" * 65), call("b", "ok.tool:1"))],
            {},
        ),
        (
            "ids-strict",
            "toolIds",
            [
                user(),
                assistant(call("a-1"), call("a_1")),
                result("a_1", "second"),
                result("a-1", "first"),
                assistant(call("a-1")),
                result("a-1", "third"),
                result("ghost", "orphan"),
                assistant(call("functions.read:0"), call("___")),
            ],
            {"mode": "strict"},
        ),
        (
            "ids-strict9",
            "toolIds",
            [
                user(),
                assistant(call("toolu_0123456789"), call("ab"), call("toolu_0123456789x")),
                result("ab", "r"),
            ],
            {"mode": "strict9"},
        ),
        (
            "ids-signed-thinking",
            "toolIds",
            [
                user(),
                assistant(thinking("t", "sig"), call("toolu_01", "read")),
                result("toolu_01", "1"),
                assistant(call("toolu_01", "read")),
                result("toolu_01", "2"),
                assistant(thinking("u", "sig"), call("bad id!", " read ")),
                result("bad id!", "3"),
            ],
            {"mode": "strict", "preserveReplaySafeThinkingToolCallIds": True},
        ),
        (
            "anthropic-turns",
            "anthropicTurns",
            [
                user("one", ts=1),
                user([TextContent(text="two")], ts=2),
                assistant("text", call("a"), call("b")),
                result("a", "A"),
                assistant(thinking("t", "s"), call("c")),
                user("x"),
                assistant(call("d"), stop="aborted"),
                user("y"),
                assistant("a1", ts=5),
                assistant("a2", stop="length", ts=6),
            ],
            {},
        ),
        (
            "gemini-turns",
            "geminiTurns",
            [user(), assistant("a", stop="toolUse"), assistant("b"), user(), user()],
            {},
        ),
        ("google-assistant-first", "googleOrdering", [assistant("hello"), user("hi")], {}),
        ("google-user-first", "googleOrdering", [user("hi"), assistant("hello")], {}),
    ]
    out = [
        {
            "name": name,
            "step": step,
            "messages": [message_to_builtins(m) for m in messages],
            "options": options,
        }
        for name, step, messages, options in raw
    ]
    routed = {
        "kind": "inter_session",
        "sourceSessionKey": "agent:main:other",
        "sourceTool": " sessions_send ",
    }
    inter = [
        {"role": "user", "content": "Please summarise.", "timestamp": 1, "provenance": routed},
        {"role": "user", "content": "  ", "timestamp": 2, "provenance": routed},
        {
            "role": "user",
            "content": "[Inter-session message] old\nbody",
            "timestamp": 3,
            "provenance": {"kind": "inter_session"},
        },
        {"role": "user", "content": "mine", "timestamp": 4, "provenance": {"kind": "external_user"}},
    ]
    out.append({"name": "inter-session", "step": "interSession", "messages": inter, "options": {}})
    signed_calls = assistant(
        " ",
        "text",
        ToolCall(id="g1", name="read", arguments={}, thought_signature="msg_abc123"),
        ToolCall(id="g2", name="read", arguments={}, thought_signature="c2lnbmF0dXJlLWJ5dGVz"),
        ToolCall(id="g3", name="read", arguments={}, thought_signature="not base64!"),
    )
    blanks = [
        user([TextContent(text=" "), TextContent(text="hi")]),
        user([TextContent(text="  ")]),
        signed_calls,
        result("g1", " ", "out"),
        result("g2", "\n"),
        result("g3", "ok"),
        assistant(" ", stop="error"),
        assistant("\t"),
        assistant("", "done"),
    ]
    for name, options in (
        (
            "content-blocks-google",
            {
                "sanitizeMode": "full",
                "sanitizeThoughtSignatures": {"allowBase64Only": True, "includeCamelCase": True},
            },
        ),
        ("content-blocks-anthropic", {"sanitizeMode": "full", "preserveSignatures": True}),
        ("content-blocks-default", {"sanitizeMode": "images-only"}),
    ):
        out.append(
            {
                "name": name,
                "step": "contentBlocks",
                "messages": [message_to_builtins(m) for m in blanks],
                "options": options,
            }
        )
    messy = [
        assistant("I start."),
        user("   "),
        user("Archive the old reports."),
        assistant(thinking("plan", "sig-1"), call("call_z", "archive", dir="r")),
        user("Are you done?"),
        assistant("NO_REPLY"),
        assistant(call("c-1", "read"), call("c-2", "bad name")),
        result("c-2", "two"),
        user("interjection"),
        result("c-1", "one"),
        result("c-1", "dup"),
        result("orphan", "x"),
        assistant(thinking("old", "  "), "answer"),
        assistant(thinking("latest"), "final"),
    ]
    normalize_cases = [
        user("   "),
        user([TextContent(text=" "), TextContent(text="real")]),
        assistant("NO_REPLY"),
        assistant("visible", "NO_REPLY"),
        assistant(thinking("hmm"), " ", stop="length"),
        assistant(stop="error"),
        user("more"),
        assistant(stop="error"),
    ]
    out.append(
        {
            "name": "normalize",
            "step": "normalize",
            "messages": [message_to_builtins(m) for m in normalize_cases],
            "options": {},
        }
    )
    thinking_turns = [
        user(),
        assistant(thinking("a", "s"), "x"),
        assistant(thinking("b")),
        assistant(thinking("c"), "y"),
    ]
    out.append(
        {
            "name": "drop-thinking",
            "step": "dropThinking",
            "messages": [message_to_builtins(m) for m in thinking_turns],
            "options": {},
        }
    )
    families = (
        ("anthropic", "anthropic-messages", "anthropic", "claude-sonnet-4-5"),
        ("anthropic-3-7", "anthropic-messages", "anthropic", "claude-3-7-sonnet-20250219"),
        ("responses", "openai-responses", "openai", "gpt-5"),
        ("completions", "openai-completions", "openrouter", "gpt-4o"),
        ("google", "google-generative-ai", "google", "gemini-2.5-pro"),
    )
    for family, api, provider, model in families:
        contexts = [
            ("messy", [message_to_builtins(m) for m in messy]),
            ("malformed-calls", malformed_calls()),
        ]
        for label, messages in contexts:
            out.append(
                {
                    "name": f"pipeline-{family}-{label}",
                    "step": "pipeline",
                    "messages": messages,
                    "options": {"api": api, "provider": provider, "modelId": model},
                }
            )
        out.extend(
            {
                "name": f"pipeline-{family}-{sample}",
                "step": "pipeline",
                "sample": sample,
                "options": {"api": api, "provider": provider, "modelId": model},
            }
            for sample in ("basic", "full", "large-2000", "v1-legacy")
        )
    out.extend(
        {
            "name": f"policy-{provider}-{api}-{model}",
            "step": "policy",
            "options": {"api": api, "provider": provider, "modelId": model},
        }
        for provider, apis in POLICY_PROVIDERS.items()
        for api in apis
        for model in POLICY_MODELS
    )
    return out


POLICY_MODELS = (
    "claude-sonnet-4-5",
    "claude-3-7-sonnet",
    "gpt-5",
    "gemini-2.5-pro",
    "kimi-k2.5",
    "mistral-large",
)
POLICY_PROVIDERS: dict[str, tuple[str, ...]] = {
    "anthropic": ("anthropic-messages",),
    "anthropic-vertex": ("anthropic-messages",),
    "amazon-bedrock": ("bedrock-converse-stream",),
    "openai": ("openai-responses", "openai-completions"),
    "openai-codex": ("openai-chatgpt-responses", "openai-responses"),
    "openrouter": ("openai-completions", "anthropic-messages"),
    "google": ("google-generative-ai",),
    "google-vertex": ("google-generative-ai",),
    "google-gemini-cli": ("google-gemini-cli",),
    "mistral": ("openai-completions",),
    "xai": ("openai-completions", "openai-responses"),
    "groq": ("openai-completions",),
    "deepseek": ("openai-completions",),
    "moonshot": ("openai-completions",),
    "ollama": ("openai-completions",),
    "together": ("openai-completions",),
    "minimax": ("anthropic-messages",),
    "github-copilot": ("openai-completions", "anthropic-messages", "openai-responses"),
    "my-custom": (
        "openai-completions",
        "anthropic-messages",
        "openai-responses",
        "google-generative-ai",
        "other",
    ),
}


def malformed_calls() -> list[dict[str, Any]]:
    """
    Tool-call blocks our records cannot hold (issue 11): no ``arguments``, ``input`` instead, extra
    fields, unfinished ``partialJson``, untrimmed names, an arg-less call in a signed thinking turn.
    Each such message is an ``UnknownMessage`` on our side; OpenClaw drops only the bad calls.
    """

    def raw(message: Any, **blocks: Any) -> dict[str, Any]:
        out = message_to_builtins(message)
        out["content"] = blocks["content"]
        return out

    def text(value: str, **extra: Any) -> dict[str, Any]:
        return {"type": "text", "text": value, **extra}

    def tool(call_id: str, name: str = "read", **fields: Any) -> dict[str, Any]:
        return {"type": "toolCall", "id": call_id, "name": name, **fields}

    shell = assistant("x", stop="toolUse")
    return [
        message_to_builtins(user("go")),
        raw(shell, content=[text("calling"), tool("a1", " read "), tool("a2", arguments={"p": 1})]),
        message_to_builtins(result("a1", "r1")),
        message_to_builtins(result("a2", "r2")),
        raw(
            shell,
            content=[
                tool("b1", " grep ", arguments={"q": "x"}, partialArgs='{"q"'),
                tool("b2", arguments={}, extra=5),
                tool("b3", arguments={}, partialJson='{"q": '),
            ],
        ),
        message_to_builtins(result("b1", "r3", name="grep")),
        message_to_builtins(result("b2", "r4")),
        message_to_builtins(result("b3", "r5")),
        raw(shell, content=[tool("c1", input={"p": 2})]),
        message_to_builtins(result("c1", "r6")),
        raw(shell, content=[tool("d1")]),  # only an arg-less call: the turn goes
        message_to_builtins(result("d1", "r7")),
        raw(
            shell,
            content=[
                {"type": "thinking", "thinking": "t", "thinkingSignature": "sig"},
                tool("e1", arguments={}),
                tool("e2"),
            ],
        ),
        message_to_builtins(result("e1", "r8")),
        message_to_builtins(result("e2", "r9")),
        raw(assistant("x"), content=[text("done", extraText=1)]),
        message_to_builtins(user("next")),
    ]


def sample_messages(name: str) -> list[dict[str, Any]]:
    """The messages of a pi sample's rebuilt context."""
    return list(json.loads((PI / f"{name}.context.json").read_text(encoding="utf-8"))["messages"])


def main() -> int:
    parser = argparse.ArgumentParser(description="regenerate the hygiene oracle fixtures")
    parser.add_argument(
        "--oracle", default="/tmp/openclaw-oracle", help="installed copy of tools/openclaw-oracle"
    )
    args = parser.parse_args()
    data = cases()
    expanded = [{**c, "messages": sample_messages(c["sample"])} if "sample" in c else c for c in data]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
        json.dump(expanded, handle)
    proc = subprocess.run(
        ["node", str(HERE / "hygiene_oracle.mjs"), args.oracle, handle.name],
        check=True,
        capture_output=True,
        text=True,
    )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "hygiene-cases.json").write_text(
        json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    results = (json.dumps(json.loads(proc.stdout), ensure_ascii=False) + "\n").encode("utf-8")
    (OUT / "hygiene-results.json.gz").write_bytes(gzip.compress(results, mtime=0))  # byte-identical on rerun
    print(f"wrote {len(data)} cases to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
