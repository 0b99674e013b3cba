"""
Adapters to the wire formats and SDKs hosts already use (issue 14): optional, imported only on demand.

Message converters (pure, no SDK needed), both directions, for three wire formats:

* OpenAI Chat Completions (also any OpenAI-compatible server): :func:`to_chat_completions_request`,
  :func:`from_chat_completion`, :class:`ChatCompletionsStream`;
* OpenAI Responses: :func:`to_responses_request`, :func:`from_openai_response`, :class:`ResponsesStream`;
* Anthropic Messages: :func:`to_anthropic_request`, :func:`from_anthropic_message`, :class:`AnthropicStream`.

Each ``to_*`` takes a ``ModelCallPlan`` (``plan.messages``), a ``SessionContext`` or the messages and
returns the request body as plain JSON values (``client.<api>.create(**body)``); each ``from_*`` and
stream accumulator returns an :class:`~sessionkeeper.transcript.AssistantMessage` with usage and stop
reason, ready for ``SessionRuntime.after_turn``.

:class:`~sessionkeeper.ModelClient` implementations over the official async SDKs live in
:mod:`sessionkeeper.adapters.openai` (extra ``openai``) and :mod:`sessionkeeper.adapters.anthropic`
(extra ``anthropic``), and an openai-agents ``Session`` in :mod:`sessionkeeper.adapters.openai_agents`
(extra ``openai-agents``); each imports its SDK when it is imported, never before: neither ``import
sessionkeeper`` nor ``import sessionkeeper.adapters`` imports a vendor SDK (DESIGN "LLM independence").
"""

from __future__ import annotations

from sessionkeeper.adapters._anthropic import ANTHROPIC_API as ANTHROPIC_API
from sessionkeeper.adapters._anthropic import THINKING_BUDGETS as THINKING_BUDGETS
from sessionkeeper.adapters._anthropic import AnthropicStream as AnthropicStream
from sessionkeeper.adapters._anthropic import anthropic_usage as anthropic_usage
from sessionkeeper.adapters._anthropic import from_anthropic_message as from_anthropic_message
from sessionkeeper.adapters._anthropic import to_anthropic_request as to_anthropic_request
from sessionkeeper.adapters._chat import CHAT_COMPLETIONS_API as CHAT_COMPLETIONS_API
from sessionkeeper.adapters._chat import ChatCompletionsStream as ChatCompletionsStream
from sessionkeeper.adapters._chat import chat_usage as chat_usage
from sessionkeeper.adapters._chat import from_chat_completion as from_chat_completion
from sessionkeeper.adapters._chat import to_chat_completions_request as to_chat_completions_request
from sessionkeeper.adapters._common import MessageSource as MessageSource
from sessionkeeper.adapters._common import ToolCallIdMap as ToolCallIdMap
from sessionkeeper.adapters._common import prepare_messages as prepare_messages
from sessionkeeper.adapters._responses import RESPONSES_API as RESPONSES_API
from sessionkeeper.adapters._responses import ResponsesStream as ResponsesStream
from sessionkeeper.adapters._responses import from_openai_response as from_openai_response
from sessionkeeper.adapters._responses import (
    messages_from_responses_items as messages_from_responses_items,
)
from sessionkeeper.adapters._responses import responses_usage as responses_usage
from sessionkeeper.adapters._responses import to_responses_request as to_responses_request


__all__ = (
    "ANTHROPIC_API",
    "CHAT_COMPLETIONS_API",
    "RESPONSES_API",
    "THINKING_BUDGETS",
    "AnthropicStream",
    "ChatCompletionsStream",
    "MessageSource",
    "ResponsesStream",
    "ToolCallIdMap",
    "anthropic_usage",
    "chat_usage",
    "from_anthropic_message",
    "from_chat_completion",
    "from_openai_response",
    "messages_from_responses_items",
    "prepare_messages",
    "responses_usage",
    "to_anthropic_request",
    "to_chat_completions_request",
    "to_responses_request",
)
