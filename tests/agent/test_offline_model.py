import itertools
import json
import time

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from graphs.intake.form_spec import DEFAULT_FORM, form_to_json
from graphs.intake.offline import FALLBACK_REPLY, OfflineChatModel, extract_values
from graphs.prompts import TASK_EXTRACT, TASK_REPLY, parse_task, render_task
from tests.agent.messages import message_text

FORM = form_to_json(DEFAULT_FORM)
EXTRA_FORM = [
    {"name": "adults", "type": "integer", "required": True, "description": "the number of adults"},
    {"name": "budget", "type": "number", "required": True, "description": "your budget"},
    {"name": "vegan", "type": "boolean", "required": True, "description": "whether you are vegan"},
    {"name": "arrival", "type": "date", "required": True, "description": "your arrival date"},
    {"name": "departure", "type": "date", "required": True, "description": "your departure date"},
]


def reply_prompt(**overrides) -> list:
    payload = {
        "form": FORM,
        "fields": {},
        "missing": ["name", "email", "preferred_date", "party_size", "topic"],
        "rejected": [],
        "field_changes": {},
        "stage": "collecting",
        "client_mode": "chat",
    } | overrides
    return [SystemMessage(render_task(TASK_REPLY, payload)), HumanMessage("hi")]


def test_prompt_block_round_trips():
    payload = {"form": FORM, "fields": {"notes": "line one\nline two"}, "asked_field": None}
    prompt = render_task(TASK_EXTRACT, payload)
    assert "AGENTSITE_TASK: extract\nAGENTSITE_INPUT: {" in prompt
    assert parse_task(prompt) == ("extract", payload)
    assert parse_task("just chatting") is None


def test_deterministic():
    model = OfflineChatModel()
    prompt = reply_prompt()
    first = model.invoke(prompt).content
    assert first == model.invoke(prompt).content
    assert first == "Hello! I need a few details from you. What is your full name?"


def test_unrecognised_prompt_gets_fallback():
    assert OfflineChatModel().invoke([HumanMessage("hello")]).content == FALLBACK_REPLY


async def test_astream_yields_one_chunk_per_token():
    model = OfflineChatModel()
    chunks = [chunk async for chunk in model.astream(reply_prompt())]
    texts = [message_text(chunk) for chunk in chunks]
    assert len(texts) == 13
    assert texts[:2] == ["Hello! ", "I "]
    assert "".join(texts) == model.invoke(reply_prompt()).content


def test_sync_stream_matches():
    model = OfflineChatModel()
    assert "".join(message_text(c) for c in model.stream(reply_prompt())) == model.invoke(reply_prompt()).content


async def test_token_delay_spreads_arrival():
    model = OfflineChatModel(token_delay_ms=30)
    arrivals = []
    async for _ in model.astream(reply_prompt()):
        arrivals.append(time.monotonic())
    assert len(arrivals) == 13
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(gaps) >= 0.025
    assert arrivals[-1] - arrivals[0] >= 12 * 0.025


def test_sync_token_delay():
    model = OfflineChatModel(token_delay_ms=20)
    started = time.monotonic()
    assert len(list(model.stream(reply_prompt()))) == 13
    assert time.monotonic() - started >= 12 * 0.018


async def test_a_whole_answer_takes_as_long_as_its_tokens():
    """A JSON turn asks for whole answers: a slow model stays slow."""
    model = OfflineChatModel(token_delay_ms=20)
    started = time.monotonic()
    answer = await model.ainvoke(reply_prompt())
    assert time.monotonic() - started >= 12 * 0.018
    started = time.monotonic()
    assert model.invoke(reply_prompt()).content == answer.content
    assert time.monotonic() - started >= 12 * 0.018


def test_extract_through_the_model():
    model = OfflineChatModel()
    prompt = [
        SystemMessage(render_task(TASK_EXTRACT, {"form": FORM, "fields": {}, "asked_field": "name"})),
        HumanMessage("Ada Lovelace"),
    ]
    assert json.loads(message_text(model.invoke(prompt))) == {"name": "Ada Lovelace"}


@pytest.mark.parametrize(
    "asked, fields, text, expected",
    [
        # explicit patterns win, by name with underscores or spaces, any case
        (
            "name",
            {},
            "Party Size: 4, EMAIL = ada@example.com; name: Ada Lovelace",
            {"party_size": "4", "email": "ada@example.com", "name": "Ada Lovelace"},
        ),
        ("email", {}, "preferred_date=2025-06-01; and then 2025-07-01", {"preferred_date": "2025-06-01"}),
        # an email anywhere goes to the email field even when another is asked
        (
            "party_size",
            {},
            "write to Ada@Example.com, we are 3",
            {"email": "Ada@Example.com", "party_size": "3"},
        ),
        # an ISO date goes to the first unfilled date field
        ("name", {}, "on 2025-06-01", {"preferred_date": "2025-06-01"}),
        ("name", {"preferred_date": "2025-01-01"}, "on 2025-06-01", {"name": "on 2025-06-01"}),
        # enum option words, any case
        ("name", {}, "it is about BILLING", {"topic": "BILLING"}),
        # the asked string takes the whole text only when nothing else was found
        ("name", {}, "  Ada Lovelace  ", {"name": "Ada Lovelace"}),
        ("name", {}, "Ada, ada@example.com", {"email": "ada@example.com"}),
        # the asked integer takes the first number not already used by a date
        ("party_size", {}, "2025-06-01 for 6 people", {"preferred_date": "2025-06-01", "party_size": "6"}),
        ("party_size", {}, "two", {}),
        # invalid values are passed on; validation rejects them later
        ("preferred_date", {}, "32/13/2024 would be great", {"preferred_date": "32/13/2024"}),
        ("email", {}, "me at home", {}),
        ("email", {}, "ada@nowhere", {"email": "ada@nowhere"}),
        ("topic", {}, "sales", {"topic": "sales"}),
        (None, {}, "hello", {}),
    ],
)
def test_extract_rules_on_default_form(asked, fields, text, expected):
    assert extract_values(FORM, fields, asked, text) == expected


@pytest.mark.parametrize(
    "asked, fields, text, expected",
    [
        ("adults", {}, "2 adults and 1 child", {"adults": "2"}),
        ("budget", {}, "about 1500.50 euros", {"budget": "1500.50"}),
        ("vegan", {}, "Yes, we are", {"vegan": "Yes"}),
        ("vegan", {}, "not sure", {}),
        # an asked date field takes the ISO date, not the first date field
        ("departure", {}, "2025-06-09", {"departure": "2025-06-09"}),
        ("adults", {}, "2025-06-01", {"arrival": "2025-06-01"}),
        ("adults", {"arrival": "2025-06-01"}, "2025-06-09", {"departure": "2025-06-09"}),
    ],
)
def test_extract_rules_per_type(asked, fields, text, expected):
    assert extract_values(EXTRA_FORM, fields, asked, text) == expected


def test_reply_rejections_then_question():
    message = "must be an email address like name@example.com"
    rejected = [{"field": "email", "value": "ada@nowhere", "message": message}]
    text = OfflineChatModel().invoke(reply_prompt(fields={"name": "Ada"}, missing=["email"], rejected=rejected)).content
    assert text == (
        "Sorry, ada@nowhere is not a valid email address: must be an email address like name@example.com. "
        "What is your email address?"
    )


def test_reply_thanks_in_chat_mode_and_only_asks_in_form_mode():
    chat = OfflineChatModel().invoke(reply_prompt(fields={"name": "Ada"}, missing=["email"])).content
    form_prompt = reply_prompt(fields={"name": "Ada"}, missing=["email"], client_mode="form")
    form = OfflineChatModel().invoke(form_prompt).content
    assert chat == "Thanks! What is your email address?"
    assert form == "What is your email address?"


def test_reply_greets_only_on_the_first_turn():
    later = [*reply_prompt(), AIMessage("Hello! ..."), HumanMessage("hmm")]
    assert OfflineChatModel().invoke(later).content == "Thanks! What is your full name?"


def test_reply_when_complete_lists_values_in_form_order():
    fields = {
        "topic": "general",
        "name": "Ada",
        "email": "a@example.com",
        "phone": None,
        "preferred_date": "2025-06-01",
        "party_size": 2,
    }
    text = OfflineChatModel().invoke(reply_prompt(fields=fields, missing=[], stage="complete")).content
    assert text == (
        "Thank you, I have everything I need: name=Ada, email=a@example.com, "
        "preferred_date=2025-06-01, party_size=2, topic=general."
    )
