import uuid
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from graphs.intake.form_spec import DEFAULT_FORM, form_to_json
from graphs.intake.graph import build_intake_graph, parse_json_object
from graphs.intake.offline import OfflineChatModel


def new_state(**overrides) -> dict[str, Any]:
    return {
        "messages": [],
        "form": form_to_json(DEFAULT_FORM),
        "fields": {},
        "stage": "collecting",
        "asked_field": None,
        "client_mode": "chat",
        "need_form_update": True,
    } | overrides


async def run_turn(graph, state: dict[str, Any], text: str, **overrides) -> tuple[dict[str, Any], list]:
    """One turn the way the protocol runs it: full state in, fresh thread."""
    turn_input = state | overrides | {"messages": [*state["messages"], HumanMessage(text)]}
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    chunks = []
    async for part in graph.astream(
        turn_input, config, stream_mode=["messages", "updates"], version="v2", durability="exit"
    ):
        if part["type"] == "messages":
            chunks.append(part["data"])
    values = (await graph.aget_state(config)).values
    return values, chunks


def carry(values: dict[str, Any]) -> dict[str, Any]:
    """What the protocol keeps between turns."""
    keep = ("messages", "form", "fields", "stage", "asked_field", "client_mode", "need_form_update")
    return {key: values[key] for key in keep}


@pytest.fixture
def graph():
    return build_intake_graph(model=OfflineChatModel(), checkpointer=InMemorySaver())


async def test_full_conversation_fills_the_default_form(graph):
    script = [
        ("hello", {}, "Hello! I need a few details from you. What is your full name?", "name"),
        ("Ada Lovelace", {"name": "Ada Lovelace"}, "Thanks! What is your email address?", "email"),
        ("it's ADA@Example.COM", {"email": "ADA@example.com"}, None, "preferred_date"),
        ("2025-06-01 please", {"preferred_date": "2025-06-01"}, None, "party_size"),
        ("we will be 4", {"party_size": 4}, None, "topic"),
        ("A booking. notes: window seat", {"topic": "booking", "notes": "window seat"}, None, None),
    ]
    state = new_state()
    for text, changes, reply, asked in script:
        values, _chunks = await run_turn(graph, state, text)
        assert values["field_changes"] == changes
        assert values["rejected"] == []
        assert values["asked_field"] == asked
        if reply is not None:
            assert values["messages"][-1].content == reply
        state = carry(values)
        assert state["stage"] == ("complete" if asked is None else "collecting")

    assert state["fields"] == {
        "name": "Ada Lovelace",
        "email": "ADA@example.com",
        "preferred_date": "2025-06-01",
        "party_size": 4,
        "topic": "booking",
        "notes": "window seat",
    }
    assert type(state["fields"]["party_size"]) is int
    assert state["messages"][-1].content == (
        "Thank you, I have everything I need: name=Ada Lovelace, email=ADA@example.com, "
        "preferred_date=2025-06-01, party_size=4, topic=booking, notes=window seat."
    )
    assert [type(m) for m in state["messages"]] == [HumanMessage, AIMessage] * len(script)


@pytest.mark.parametrize(
    "asked, text, field, needle",
    [
        ("preferred_date", "32/13/2024", "preferred_date", "Sorry, 32/13/2024 is not a valid preferred date"),
        ("preferred_date", "2024-02-30", "preferred_date", "not a real calendar date"),
        ("email", "ada@nowhere", "email", "Sorry, ada@nowhere is not a valid email address"),
        ("topic", "sales", "topic", "Sorry, sales is not a valid topic of your request"),
    ],
)
async def test_invalid_values_are_rejected_and_the_reply_says_so(graph, asked, text, field, needle):
    state = new_state(fields={"name": "Ada"}, asked_field=asked)
    values, _ = await run_turn(graph, state, text)
    assert values["field_changes"] == {}
    assert [(r["field"], r["value"]) for r in values["rejected"]] == [(field, text)]
    assert values["fields"] == {"name": "Ada"}
    assert needle in values["messages"][-1].content
    assert values["asked_field"] == "email"


async def test_per_turn_keys_are_reset(graph):
    stale = {"field_changes": {"name": "Old"}, "rejected": [{"field": "email", "value": "x", "message": "m"}]}
    values, _ = await run_turn(graph, new_state(**stale), "hello")
    assert values["field_changes"] == {}
    assert values["rejected"] == []


async def test_unchanged_value_is_not_a_change(graph):
    state = new_state(fields={"email": "ada@example.com"}, asked_field="name")
    values, _ = await run_turn(graph, state, "email: ada@EXAMPLE.com")
    assert values["field_changes"] == {}
    assert values["fields"] == {"email": "ada@example.com"}


async def test_need_form_update_false_skips_extraction():
    # One scripted answer only: an extract call would use it up and the reply would fail.
    model = GenericFakeChatModel(messages=iter(["Noted."]))
    graph = build_intake_graph(model=model, checkpointer=InMemorySaver())
    state = new_state(fields={"name": "Ada"}, asked_field="email")
    values, _ = await run_turn(graph, state, "email: ada@example.com", need_form_update=False)
    assert values["field_changes"] == {}
    assert values["rejected"] == []
    assert values["fields"] == {"name": "Ada"}
    assert values["messages"][-1].content == "Noted."
    assert values["stage"] == "collecting"


async def test_messages_stream_carries_only_reply_tokens(graph):
    values, chunks = await run_turn(graph, new_state(asked_field="name"), "Ada Lovelace, party size: 3")
    assert values["field_changes"] == {"party_size": 3}
    assert len(chunks) > 1
    assert {meta["langgraph_node"] for _, meta in chunks} == {"reply"}
    assert "".join(chunk.content for chunk, _ in chunks) == values["messages"][-1].content


async def test_stage_is_complete_when_fields_were_already_filled(graph):
    fields = {
        "name": "Ada",
        "email": "a@example.com",
        "preferred_date": "2025-06-01",
        "party_size": 2,
        "topic": "general",
    }
    values, _ = await run_turn(graph, new_state(fields=fields), "anything else?", client_mode="form")
    assert values["stage"] == "complete"
    assert values["asked_field"] is None
    assert values["messages"][-1].content.startswith("Thank you, I have everything I need: name=Ada")


class ExplodingModel(BaseChatModel):
    fail_on_call: int
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "exploding"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise TimeoutError("provider timed out")
        return OfflineChatModel()._generate(messages)


@pytest.mark.parametrize("fail_on_call", [1, 2], ids=["extract", "reply"])
async def test_model_errors_propagate(fail_on_call):
    graph = build_intake_graph(model=ExplodingModel(fail_on_call=fail_on_call), checkpointer=InMemorySaver())
    with pytest.raises(TimeoutError, match="provider timed out"):
        await run_turn(graph, new_state(asked_field="name"), "Ada")


async def test_provider_style_scripted_model():
    model = GenericFakeChatModel(
        messages=iter(
            [
                ('Here you go:\n```json\n{"name": "Ada", "party_size": "4", "colour": "red", "phone": null}\n```'),
                "Nice to meet you, Ada! What is your email address?",
                "I could not find any values, sorry.",
                "What is your email address?",
            ]
        )
    )
    graph = build_intake_graph(model=model, checkpointer=InMemorySaver())
    values, chunks = await run_turn(graph, new_state(asked_field="name"), "I'm Ada, table for 4")
    assert values["field_changes"] == {"name": "Ada", "party_size": 4}
    assert values["asked_field"] == "email"
    assert values["messages"][-1].content == "Nice to meet you, Ada! What is your email address?"
    assert {meta["langgraph_node"] for _, meta in chunks} == {"reply"}
    assert "".join(chunk.content for chunk, _ in chunks) == values["messages"][-1].content

    # Unparsable extraction output means no changes, not a crash.
    values, _ = await run_turn(graph, carry(values), "hmm")
    assert values["field_changes"] == {}
    assert values["fields"] == {"name": "Ada", "party_size": 4}


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('Sure! {"a": {"b": 2}} Hope that helps.', {"a": {"b": 2}}),
        ("[1, 2]", {}),
        ("{not json}", {}),
        ("", {}),
    ],
)
def test_parse_json_object(text, expected):
    assert parse_json_object(text) == expected
