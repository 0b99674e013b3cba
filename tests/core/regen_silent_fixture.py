"""
Regenerate ``tests/data/oracle/silent.json`` from OpenClaw 2026.7.35's own code.

Runs ``silent.mjs`` of the OpenClaw oracle (``$OPENCLAW_ORACLE``, default ``/tmp/openclaw-oracle``; see
``tools/openclaw-oracle/README.md``) on a table of texts and writes its JSON output, which
``test_core_silent.py`` compares our ports against (no node needed in CI).

    python tests/core/regen_silent_fixture.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


OUT = Path(__file__).resolve().parent.parent / "data" / "oracle" / "silent.json"

TOKEN_FORMS = [
    "NO_REPLY",
    "no_reply",
    "No_Reply",
    "nO_rEpLy",
    "NO_REPLY NO_REPLY",
    "NO_REPLY\nNO_REPLY",
    "NO_REPLYNO_REPLY",
    "NO_REPLY  no_reply\tNO_REPLY",
    "  NO_REPLY  ",
    "\nNO_REPLY\n",
    "\u00a0NO_REPLY\u00a0",
    "\ufeffNO_REPLY",
    "\u3000NO_REPLY\u2028",
    "\u0085NO_REPLY",
    "\x1cNO_REPLY",
    "\u200bNO_REPLY",
]
PUNCTUATION = [
    "NO_REPLY.",
    "NO_REPLY!",
    "NO_REPLY...",
    "**NO_REPLY**",
    "*NO_REPLY*",
    "_NO_REPLY_",
    "`NO_REPLY`",
    "```NO_REPLY```",
    "~~NO_REPLY~~",
    '"NO_REPLY"',
    "'NO_REPLY'",
    "(NO_REPLY)",
    "[NO_REPLY]",
    "«NO_REPLY»",
    "“NO_REPLY”",
    "¡NO_REPLY!",
    "** NO_REPLY **",
    "* * NO_REPLY",
    "NO_REPLY.\n",
    " .NO_REPLY. ",
    "-NO_REPLY-",
    "—NO_REPLY—",
    "#NO_REPLY",
    "> NO_REPLY",
    "$NO_REPLY",
    "NO_REPLY :)",
    "NO-REPLY",
    "NO REPLY",
    "NOREPLY",
    "NO__REPLY",
]
LOOKALIKES = [
    "NO",
    "No",
    "no",
    "N",
    "NO_",
    "NO_R",
    "NO_RE",
    "NO_REP",
    "NO_REPL",
    "no_",
    "No_",
    "NOTE",
    "NOPE",
    "NONE",
    "NO.",
    "NO!",
    "NO REPLY NEEDED",
    "  NO",
    "  NO_RE",
    "HE",
    "HEART",
    "HEARTBEAT_",
    "HEARTBEAT_OK",
    "heartbeat_ok",
    "NO_REPLYING",
    "NO_REPLY_",
    "NO_REPLY2",
    "ＮＯ_ＲＥＰＬＹ",
    "NΟ_REPLY",
    "NO\u200b_REPLY",
    "",
    " ",
    "\n\n",
]
MIXED = [
    "NO_REPLYThe user is saying hello",
    "NO_REPLY The user is saying hello",
    "NO_REPLY\nThe user is saying hello",
    "NO_REPLY\n\nHello",
    "NO_REPLY\r\nHello",
    "NO_REPLY NO_REPLYHello",
    "NO_REPLY NO_REPLY\nHello",
    "no_replyHello",
    "NO_REPLY42",
    "NO_REPLYé",
    "NO_REPLY日本",
    "NO_REPLY.Hello",
    "NO_REPLY Hello",
    "Done. NO_REPLY",
    "Done.NO_REPLY",
    "Done **NO_REPLY",
    "Done ** NO_REPLY",
    "Done*NO_REPLY",
    "Done NO_REPLY NO_REPLY  ",
    "Done no_reply",
    "DoneNO_REPLY",
    "Done NO_REPLY.",
    "Here is the answer: NO_REPLY is the token",
    "I will reply NO_REPLY when idle.",
    "Hello",
    "No problem, done.",
    "NOTE: build passed",
    "**Bold** answer",
]
PAYLOADS = [
    '"NO_REPLY"',
    '" NO_REPLY "',
    '"no_reply"',
    '{"action":"NO_REPLY"}',
    '{ "action" : " NO_REPLY " }',
    '{"action":"NO_REPLY","reason":"x"}',
    '{"action":"no_reply"}',
    '{"Action":"NO_REPLY"}',
    '["NO_REPLY"]',
    "<think>The user said thanks.</think>NO_REPLY",
    "<thinking>nothing to add</thinking>\n\nNO_REPLY",
    "<thought>x</thought> <think>y</think> NO_REPLY",
    "<antthinking>hmm</antthinking>NO_REPLY",
    "<think>hmm</think>I'll stay quiet. NO_REPLY",
    "<think>hmm</think>I will not reply here. NO_REPLY",
    "<think>hmm</think>Here is the answer. NO_REPLY",
    "<think>unclosed reasoning NO_REPLY",
    "<think>unclosed\nI have nothing to add.\nNO_REPLY",
    "<think>unclosed\nYou should try again.\nI'll stay quiet.\nNO_REPLY",
    "<think>\nthinking\nNO_REPLY",
    "thinking:\nNO_REPLY",
    "Analysis:\nThe user is chatting.\nI'll remain silent.\nNO_REPLY",
    "analysis:\nYes, the service is up.\nI'll remain silent.\nNO_REPLY",
    "reasoning\nprivate reasoning notes NO_REPLY",
    "Thought:\r\nWe won't respond in this thread. NO_REPLY",
    "thinking: NO_REPLY",
    "<THINK>x</THINK>NO_REPLY",
    "< think >x< / think >NO_REPLY",
    "<mm:think>x</mm:think>NO_REPLY",
]
ARTIFACTS = [
    "<|channel|>",
    "  <|channel|final>  ",
    "set-thought <|x|>",
    "<channel|>",
    "───",
    "  ─────  ",
    "──",
    "--- ",
]
# Every prefix of these texts: what a stream has accumulated after each possible chunk split.
STREAMED = [
    "NO_REPLY",
    "NO_REPLY NO_REPLY",
    "**NO_REPLY**",
    "NO_REPLYThe",
    "No problem",
    "Done. NO_REPLY",
    "HEARTBEAT_OK",
]


def texts() -> list[str]:
    table = [*TOKEN_FORMS, *PUNCTUATION, *LOOKALIKES, *MIXED, *PAYLOADS, *ARTIFACTS]
    for text in STREAMED:
        table.extend(text[:k] for k in range(1, len(text) + 1))
    seen: set[str] = set()
    return [t for t in table if not (t in seen or seen.add(t))]


def oracle_dir() -> Path:
    """The installed OpenClaw oracle (``$OPENCLAW_ORACLE``, default ``/tmp/openclaw-oracle``)."""
    return Path(os.environ.get("OPENCLAW_ORACLE", "/tmp/openclaw-oracle"))


def run_oracle(table: list[str], oracle: Path) -> dict[str, Any]:
    """Classify ``table`` with OpenClaw's own helpers (``silent.mjs --stdin``)."""
    run = subprocess.run(
        ["node", str(oracle / "silent.mjs"), "--stdin"],
        input=json.dumps(table),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def main() -> int:
    oracle = oracle_dir()
    if not (oracle / "node_modules").is_dir():
        print(
            f"OpenClaw oracle not installed in {oracle} (see tools/openclaw-oracle/README.md)",
            file=sys.stderr,
        )
        return 2
    data = run_oracle(texts(), oracle)
    data["generatedBy"] = "tests/core/regen_silent_fixture.py"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(data['results'])} cases to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
