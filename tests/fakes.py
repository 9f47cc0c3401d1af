"""A scripted chat model for tests: the offline model's answers, plus a call
log, a gate that holds a reply mid-stream, and failure injection. Its state
lives in a `Script` shared across threads and event loops."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult

from graphs.intake.offline import OfflineChatModel
from graphs.prompts import parse_task


class Script:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[dict[str, Any]] = []
        # Set `gate` to hold every reply after its first token until gate.set().
        self.gate: threading.Event | None = None
        self.reply_started = threading.Event()
        # An exception to raise from the next calls of this task ("extract"/"reply").
        self.fail: dict[str, BaseException] = {}

    def record(self, task: str, messages: list[BaseMessage]) -> None:
        with self.lock:
            self.calls.append({"task": task, "messages": list(messages)})

    def count(self, task: str | None = None) -> int:
        with self.lock:
            return sum(1 for c in self.calls if task is None or c["task"] == task)

    def last(self, task: str) -> dict[str, Any]:
        with self.lock:
            return [c for c in self.calls if c["task"] == task][-1]


def task_of(messages: list[BaseMessage]) -> str:
    for message in messages:
        if isinstance(message, SystemMessage):
            parsed = parse_task(str(message.content))
            if parsed:
                return parsed[0]
    return "unknown"


GATED_TASKS = frozenset({"reply", "booking"})


class ScriptedModel(OfflineChatModel):
    script: Any = None

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        task = task_of(messages)
        self.script.record(task, messages)
        if task in self.script.fail:
            raise self.script.fail[task]
        gate = self.script.gate
        result = self._generate(messages, stop=stop, **kwargs)
        # Unstreamed (a JSON turn): the reply holds before it is returned.
        if task in GATED_TASKS and result.generations[0].message.content:
            await self._hold(gate)
        return result

    async def _hold(self, gate: threading.Event | None) -> None:
        self.script.reply_started.set()
        if gate is not None:
            # A threading.Event, so tests in other threads and loops can open it.
            while not gate.is_set():
                await asyncio.sleep(0.005)

    async def _astream(
        self, messages, stop=None, run_manager=None, **kwargs
    ) -> AsyncIterator[ChatGenerationChunk]:
        task = task_of(messages)
        self.script.record(task, messages)
        if task in self.script.fail:
            raise self.script.fail[task]
        gate = self.script.gate  # the gate of this call, even if the test swaps it
        first = True
        async for chunk in super()._astream(messages, stop=stop, **kwargs):
            yield chunk
            # A reply to the user (intake's, or the booking agent's text) holds
            # after its first token; tool calls and extraction never do.
            if first and task in GATED_TASKS and chunk.message.content:
                first = False
                await self._hold(gate)


# The script the `script` fixture installed; AGENT_MODEL="tests.fakes:scripted_model".
CURRENT_SCRIPT: Script | None = None


def scripted_model() -> ScriptedModel:
    assert CURRENT_SCRIPT is not None, "use the `script` fixture"
    return ScriptedModel(script=CURRENT_SCRIPT)
