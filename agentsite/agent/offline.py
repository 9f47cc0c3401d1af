"""A deterministic, network-free chat model that follows the intake prompts.

It reads the machine-readable block of the prompts in `prompts.py`, so the
same graph runs with it and with a real provider. Same input, same output.
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
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool

from agentsite.agent.prompts import TASK_EXTRACT, TASK_REPLY, parse_task

_TOKEN_RE = re.compile(r"\S+\s*")
_EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_ISO_DATE_RE = re.compile(r"(?<![0-9])[0-9]{4}-[0-9]{2}-[0-9]{2}(?![0-9])")
# Catches malformed dates (31/12/2024) so validation can reject them out loud.
_DATE_LIKE_RE = re.compile(r"(?<![0-9])[0-9]{1,4}[-/.][0-9]{1,2}[-/.][0-9]{1,4}(?![0-9])")
_NUMBER_RE = re.compile(r"(?<![\w.])[-+]?[0-9]+(?:\.[0-9]+)?(?![\w])")
_BOOLEAN_RE = re.compile(r"(?<!\w)(yes|no|true|false)(?!\w)", re.IGNORECASE)
_AT_TOKEN_RE = re.compile(r"\S*@\S*")
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

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=_as_message(respond(messages)))])

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
        for index, chunk in enumerate(_chunks(respond(messages))):
            if index and self.token_delay_ms:
                await asyncio.sleep(self.token_delay_ms / 1000)
            yield chunk


def _as_message(answer: "str | AIMessage") -> AIMessage:
    return answer if isinstance(answer, AIMessage) else AIMessage(content=answer)


def _chunks(answer: "str | AIMessage") -> list[ChatGenerationChunk]:
    if isinstance(answer, AIMessage) and answer.tool_calls:
        calls = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
            for i, c in enumerate(answer.tool_calls)
        ]
        chunk = AIMessageChunk(content=answer.text, tool_call_chunks=calls, chunk_position="last")
        return [ChatGenerationChunk(message=chunk)]
    text = _as_message(answer).text
    tokens = _TOKEN_RE.findall(text) or [text]
    chunks = [ChatGenerationChunk(message=AIMessageChunk(content=token)) for token in tokens]
    # Marking the end ourselves stops langchain appending an empty closing chunk.
    chunks[-1].message.chunk_position = "last"
    return chunks


def respond(messages: list[BaseMessage]) -> "str | AIMessage":
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


def extract_values(
    form: list[dict[str, Any]], fields: dict[str, Any], asked_field: str | None, text: str
) -> dict[str, str]:
    """Raw values found in `text`, by the rules in the module's brief, in order of precedence."""
    found: dict[str, str] = {}
    # Spans already used are blanked out so later rules do not reuse them.
    rest = _take_explicit(form, text, found)

    def first_of_type(kind: str, *, unfilled: bool = False) -> str | None:
        for spec in form:
            name = spec["name"]
            if spec["type"] == kind and name not in found and not (unfilled and fields.get(name) is not None):
                return name
        return None

    rest = _take(_EMAIL_RE, rest, found, first_of_type("email"))
    asked = next((spec for spec in form if spec["name"] == asked_field), None)
    date_target = asked_field if asked and asked["type"] == "date" and asked_field not in found else None
    rest = _take(_ISO_DATE_RE, rest, found, date_target or first_of_type("date", unfilled=True))
    for spec in form:
        if spec["type"] == "enum" and spec["name"] not in found:
            options = "|".join(re.escape(option) for option in spec["enum"])
            rest = _take(re.compile(rf"(?<!\w)(?:{options})(?!\w)", re.IGNORECASE), rest, found, spec["name"])
    if asked is not None and asked["name"] not in found:
        _take_asked(asked, rest, text, found)
    return found


def _take_explicit(form: list[dict[str, Any]], text: str, found: dict[str, str]) -> str:
    names = sorted((spec["name"] for spec in form), key=len, reverse=True)
    labels = "|".join(re.escape(name).replace("_", "[_ ]") for name in names)
    matches = list(re.finditer(rf"(?<!\w)(?P<label>{labels})\s*[:=]\s*", text, re.IGNORECASE))
    rest = text
    for index, match in enumerate(matches):
        segment_end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        cut = re.search(r"[\n;]", text[match.end() : segment_end])
        value_end = match.end() + cut.start() if cut else segment_end
        value = text[match.end() : value_end].strip().rstrip(",.").strip()
        name = match["label"].lower().replace(" ", "_")
        if value and name not in found:
            found[name] = value
        rest = _blank(rest, match.start(), value_end)
    return rest


def _take(pattern: re.Pattern[str], rest: str, found: dict[str, str], target: str | None) -> str:
    if target is None:
        return rest
    match = pattern.search(rest)
    if match is None:
        return rest
    found[target] = match.group(0)
    return _blank(rest, match.start(), match.end())


def _take_asked(asked: dict[str, Any], rest: str, text: str, found: dict[str, str]) -> None:
    kind = asked["type"]
    patterns = {
        "integer": _NUMBER_RE,
        "number": _NUMBER_RE,
        "boolean": _BOOLEAN_RE,
        "date": _DATE_LIKE_RE,
        "email": _AT_TOKEN_RE,
    }
    if kind in patterns:
        _take(patterns[kind], rest, found, asked["name"])
    elif not found and text.strip():
        # string and enum: a bare answer is the whole message.
        found[asked["name"]] = text.strip()


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


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
