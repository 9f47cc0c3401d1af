import json
import re
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import ImproperlyConfigured
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from agentsite.agent.models import build_model
from agentsite.agent.offline import OfflineChatModel, respond
from agentsite.agent.registry import UnknownGraph, build_graph
from agentsite.agent.form_spec import DEFAULT_FORM, form_to_json


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


@pytest.mark.parametrize("name", ["nosuchprovider:model", "anthropic:claude-x"])
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
    a real LLM that follows the prompts."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        classes = {"system": SystemMessage, "user": HumanMessage}
        messages = [classes.get(m["role"], HumanMessage)(m["content"]) for m in body["messages"]]
        text = respond(messages)
        # Graph runs stream every model call (even nostream-tagged ones), so SSE only.
        assert body.get("stream"), "expected a streaming request"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for delta, finish_reason in self._deltas(text):
            event = self._envelope("chat.completion.chunk", delta=delta, finish_reason=finish_reason)
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

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
    state = {
        "messages": [HumanMessage("Ada Lovelace")],
        "form": form_to_json(DEFAULT_FORM),
        "fields": {},
        "stage": "collecting",
        "asked_field": "name",
        "client_mode": "chat",
        "need_form_update": True,
    }
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    chunks = []
    async for part in graph.astream(state, config, stream_mode=["messages", "updates"], version="v2"):
        if part["type"] == "messages":
            chunks.append(part["data"])
    values = (await graph.aget_state(config)).values
    assert values["field_changes"] == {"name": "Ada Lovelace"}
    assert values["messages"][-1].content == "Thanks! What is your email address?"
    assert {meta["langgraph_node"] for _, meta in chunks} == {"reply"}
    assert "".join(chunk.content for chunk, _ in chunks) == values["messages"][-1].content
