"""A deterministic, network-free chat model that follows the intake prompts.

It reads the machine-readable block of the prompts in `prompts.py`, so the
same graph runs with it and with a real provider. Same input, same output
(a written date without a year resolves against today's date). Its
extraction rules are in `extract_rules.py`.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool

from graphs.intake.extract_rules import extract_values
from graphs.prompts import TASK_EXTRACT, TASK_REPLY, parse_task

_TOKEN_RE = re.compile(r"\S+\s*")
_ARTICLE_RE = re.compile(r"^(?:your|the|any|a|an)\s+", re.IGNORECASE)

FALLBACK_REPLY = "I can only help with filling in a form."


# Other graphs' tasks (AGENTSITE_TASK: <name>): handler(messages, payload)
# returns the reply text, or an AIMessage (tool calls).
TaskHandler = Callable[[list[BaseMessage], dict[str, Any]], "str | AIMessage"]
_TASKS: dict[str, TaskHandler] = {}


def register_task(task: str, handler: TaskHandler) -> None:
    _TASKS[task] = handler


class OfflineChatModel(BaseChatModel):
    token_delay_ms: float = 0

    @property
    def _llm_type(self) -> str:
        return "agentsite-offline"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable:
        # The task handlers decide which tools to call; binding only records them.
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    # A whole answer takes as long as its streamed tokens would: a slow
    # model is slow whether or not its caller streams (AGENT_OFFLINE_TOKEN_DELAY_MS).
    # _generate and _agenerate are twins, as _stream and _astream are.
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        answer = respond(messages)
        if self.token_delay_ms:
            time.sleep(self._answer_delay(answer))
        return ChatResult(generations=[ChatGeneration(message=_as_message(answer))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        answer = await asyncio.to_thread(respond, messages)  # off the loop, as in _astream
        if self.token_delay_ms:
            await asyncio.sleep(self._answer_delay(answer))
        return ChatResult(generations=[ChatGeneration(message=_as_message(answer))])

    def _answer_delay(self, answer: str | AIMessage) -> float:
        return (len(_chunks(answer)) - 1) * self.token_delay_ms / 1000

    # _stream and _astream are twins: change both together.
    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for index, chunk in enumerate(_chunks(respond(messages))):
            if index and self.token_delay_ms:
                time.sleep(self.token_delay_ms / 1000)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        # Off the event loop: extraction is linear, but over 16k characters
        # and a big form it is still milliseconds of CPU the loop (and every
        # other request on it) should not wait for.
        text = await asyncio.to_thread(respond, messages)
        for index, chunk in enumerate(_chunks(text)):
            if index and self.token_delay_ms:
                await asyncio.sleep(self.token_delay_ms / 1000)
            yield chunk


def _as_message(answer: str | AIMessage) -> AIMessage:
    return answer if isinstance(answer, AIMessage) else AIMessage(content=answer)


def _chunks(answer: str | AIMessage) -> list[ChatGenerationChunk]:
    if isinstance(answer, AIMessage) and answer.tool_calls:
        calls = [
            tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c["id"], index=i)
            for i, c in enumerate(answer.tool_calls)
        ]
        chunk = AIMessageChunk(content=answer.text, tool_call_chunks=calls, chunk_position="last")
        return [ChatGenerationChunk(message=chunk)]
    text = _as_message(answer).text
    tokens = _TOKEN_RE.findall(text) or [text]
    *leading, last = tokens
    chunks = [ChatGenerationChunk(message=AIMessageChunk(content=token)) for token in leading]
    # Marking the end ourselves stops langchain appending an empty closing chunk.
    chunks.append(ChatGenerationChunk(message=AIMessageChunk(content=last, chunk_position="last")))
    return chunks


def respond(messages: list[BaseMessage]) -> str | AIMessage:
    system = next((m for m in messages if isinstance(m, SystemMessage)), None)
    parsed = parse_task(system.text) if system is not None else None
    if parsed is None:
        return FALLBACK_REPLY
    task, payload = parsed
    if task in _TASKS:
        return _TASKS[task](messages, payload)
    if task == TASK_EXTRACT:
        human = [m for m in messages if isinstance(m, HumanMessage)]
        text = human[-1].text if human else ""
        found = extract_values(payload["form"], payload["fields"], payload.get("asked_field"), text)
        return json.dumps(found, ensure_ascii=False)
    if task == TASK_REPLY:
        first_turn = not any(isinstance(m, AIMessage) for m in messages)
        return compose_reply(payload, first_turn=first_turn)
    return FALLBACK_REPLY


def compose_reply(payload: dict[str, Any], *, first_turn: bool) -> str:
    form = payload["form"]
    fields = payload["fields"]
    missing = payload["missing"]
    rejected = payload["rejected"]
    descriptions = {spec["name"]: spec["description"] or spec["name"].replace("_", " ") for spec in form}
    parts = [
        f"Sorry, {_show(item['value'])} is not a valid "
        f"{_ARTICLE_RE.sub('', descriptions.get(item['field'], item['field']))}: {item['message']}."
        for item in rejected
    ]
    if missing:
        if payload["client_mode"] == "chat" and not rejected:
            nothing_filled = all(value is None for value in fields.values())
            greeting = "Hello! I need a few details from you." if first_turn and nothing_filled else "Thanks!"
            parts.append(greeting)
        parts.append(f"What is {descriptions[missing[0]]}?")
    else:
        filled = [spec["name"] for spec in form if fields.get(spec["name"]) is not None]
        summary = ", ".join(f"{name}={_show(fields[name])}" for name in filled)
        parts.append(f"Thank you, I have everything I need: {summary}.")
    return " ".join(parts)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
