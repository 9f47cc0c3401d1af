import json
import re
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from django.core.exceptions import ImproperlyConfigured
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import StreamMode

from graphs.intake.form_spec import DEFAULT_FORM, form_to_json
from graphs.intake.offline import OfflineChatModel, respond
from graphs.runtime.chat_models import build_model
from graphs.runtime.registry import UnknownGraph, build_graph
from tests.agent.messages import message_text


def test_offline_model_takes_its_delay_from_settings(settings):
    settings.AGENT_MODEL = "offline"
    settings.AGENT_OFFLINE_TOKEN_DELAY_MS = 7
    model = build_model()
    assert isinstance(model, OfflineChatModel)
    assert model.token_delay_ms == 7


def fake_model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(["hi"]))


def test_a_factory_named_by_import_path():
    assert isinstance(build_model(f"{__name__}:fake_model"), GenericFakeChatModel)
    with pytest.raises(ImproperlyConfigured, match="cannot be imported"):
        build_model(f"{__name__}:no_such_factory")


# A provider LangChain knows whose integration package is not installed
# (mistralai: nothing in requirements*.txt pulls in langchain-mistralai).
@pytest.mark.parametrize("name", ["nosuchprovider:model", "mistralai:mistral-x"])
def test_unusable_model_names_are_configuration_errors(name):
    with pytest.raises(ImproperlyConfigured, match="AGENT_MODEL="):
        build_model(name)


def test_openai_without_credentials_is_a_configuration_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ImproperlyConfigured, match="openai:gpt-4o-mini"):
        build_model("openai:gpt-4o-mini")


def test_build_graph_builds_registered_graphs_and_rejects_unknown_names():
    assert build_graph("intake", checkpointer=None).name == "intake"
    assert build_graph("booking", checkpointer=None).name == "booking"
    with pytest.raises(UnknownGraph):
        build_graph("nope", checkpointer=None)


class FakeOpenAIHandler(BaseHTTPRequestHandler):
    """Chat completions answered by the offline model's logic: a stand-in for
    a real LLM that follows the prompts, tool calls included."""

    # Whether each request asked for a stream (streamed turns do; JSON turns do not).
    streamed: ClassVar[list[bool]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answer = respond([_message(m) for m in body["messages"]])
        self.streamed.append(bool(body.get("stream")))
        if not body.get("stream"):
            return self._whole(answer, offered_tools=bool(body.get("tools")))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if isinstance(answer, AIMessage) and answer.tool_calls:
            assert body.get("tools"), "a tool call without tools offered"
            deltas = self._tool_deltas(answer)
        else:
            deltas = self._deltas(answer if isinstance(answer, str) else answer.text)
        for delta, finish_reason in deltas:
            event = self._envelope("chat.completion.chunk", delta=delta, finish_reason=finish_reason)
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def _whole(self, answer: "str | AIMessage", *, offered_tools: bool) -> None:
        message: dict = {"role": "assistant", "content": answer if isinstance(answer, str) else answer.text}
        finish_reason = "stop"
        if isinstance(answer, AIMessage) and answer.tool_calls:
            assert offered_tools, "a tool call without tools offered"
            message["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["args"])}}
                for c in answer.tool_calls
            ]
            finish_reason = "tool_calls"
        payload = json.dumps(self._envelope("chat.completion", message=message, finish_reason=finish_reason)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    @staticmethod
    def _tool_deltas(answer: AIMessage) -> Iterator[tuple[dict, str | None]]:
        calls = [
            {
                "index": i,
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
            }
            for i, c in enumerate(answer.tool_calls)
        ]
        yield {"role": "assistant", "content": None, "tool_calls": calls}, None
        yield {}, "tool_calls"

    @staticmethod
    def _deltas(text: str) -> Iterator[tuple[dict, str | None]]:
        yield {"role": "assistant", "content": ""}, None
        for token in re.findall(r"\S+\s*", text):
            yield {"content": token}, None
        yield {}, "stop"

    @staticmethod
    def _envelope(kind: str, **choice) -> dict:
        return {
            "id": "chatcmpl-1",
            "object": kind,
            "created": 0,
            "model": "fake",
            "choices": [{"index": 0, "finish_reason": "stop"} | choice],
        }

    def log_message(self, *args) -> None:
        pass


def _message(m: dict):
    """An OpenAI chat message as the LangChain message the offline model reads."""
    if m["role"] == "system":
        return SystemMessage(m["content"])
    if m["role"] == "tool":
        return ToolMessage(m["content"], tool_call_id=m["tool_call_id"], name=_TOOL_NAMES.get(m["tool_call_id"]))
    if m["role"] == "assistant":
        calls = [
            {"id": c["id"], "name": c["function"]["name"], "args": json.loads(c["function"]["arguments"])}
            for c in m.get("tool_calls") or []
        ]
        _TOOL_NAMES.update({c["id"]: c["name"] for c in calls})
        return AIMessage(m.get("content") or "", tool_calls=calls)
    return HumanMessage(m["content"])


_TOOL_NAMES: dict[str, str] = {}  # OpenAI's tool messages carry no tool name


@pytest.fixture
def fake_openai(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAIHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    yield server
    server.shutdown()
    server.server_close()


async def test_openai_provider_runs_the_graph_against_openai_base_url(fake_openai, settings):
    settings.AGENT_MODEL = "openai:gpt-4o-mini"
    model = build_model()
    assert isinstance(model, ChatOpenAI)
    assert str(model.root_async_client.base_url).startswith(f"http://127.0.0.1:{fake_openai.server_port}/v1")
    graph = build_graph("intake", checkpointer=InMemorySaver())
    # The graph is typed by its own state schema; this test hands it a plain dict.
    state: Any = {
        "messages": [HumanMessage("Ada Lovelace")],
        "form": form_to_json(DEFAULT_FORM),
        "fields": {},
        "stage": "collecting",
        "asked_field": "name",
        "client_mode": "chat",
        "need_form_update": True,
    }
    config: RunnableConfig = {"configurable": {"thread_id": str(uuid.uuid4())}}
    FakeOpenAIHandler.streamed.clear()
    chunks = []
    modes: list[StreamMode] = ["messages", "updates"]
    async for part in graph.astream(state, config, stream_mode=modes, version="v2"):
        if part["type"] == "messages":
            chunks.append(part["data"])
    values = (await graph.aget_state(config)).values
    assert values["field_changes"] == {"name": "Ada Lovelace"}
    assert values["messages"][-1].content == "Thanks! What is your email address?"
    assert {meta["langgraph_node"] for _, meta in chunks} == {"reply"}
    assert "".join(message_text(chunk) for chunk, _ in chunks) == values["messages"][-1].content
    # Streamed runs ask the provider for streams, even for nostream-tagged calls.
    assert FakeOpenAIHandler.streamed and all(FakeOpenAIHandler.streamed)


@pytest.mark.django_db(transaction=True)
async def test_an_openai_provider_runs_the_booking_graph_with_tool_calls(fake_openai, settings, api):
    """The booking graph on a real provider client (ChatOpenAI) against an
    OpenAI-compatible server: tool calls, the approval pause and the commit."""
    from graphs.booking.models import Booking
    from tests.fixtures.runners import orm

    settings.AGENT_MODEL = "openai:gpt-4o-mini"
    FakeOpenAIHandler.streamed.clear()
    assert (await api.call("POST", "/sessions", {"key": "b1", "graph": "booking"})).status_code == 201
    paused = json.loads(
        (await api.chat("b1", "Book a table for 2 people on 2031-05-01 at 19:30, my name is Ada Lovelace")).content
    )
    assert paused["status"] == "interrupted", paused
    assert paused["interrupts"][0]["value"]["action_requests"][0]["args"]["name"] == "Ada Lovelace"
    done = await api.call("POST", "/sessions/b1/turns", {"resume": {"decisions": [{"type": "approve"}]}})
    assert done.status_code == 200, done.content
    (booking,) = await orm(lambda: list(Booking.objects.all()))
    assert booking.reference in json.loads(done.content)["reply"]
    # JSON turns wait for whole answers: the provider is never asked to stream.
    assert FakeOpenAIHandler.streamed and not any(FakeOpenAIHandler.streamed)
