"""The offline model's extraction: values volunteered on any turn, and a
cost that stays linear whatever the text and form (docs/graphs.md,
"The offline model's extraction")."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from graphs.intake import offline
from graphs.intake.extract_rules import extract_values
from graphs.intake.form_spec import DEFAULT_FORM, FormSpecError, check_form_size, form_to_json
from graphs.prompts import TASK_EXTRACT, render_task
from tests.agent.messages import message_text

FORM = form_to_json(DEFAULT_FORM)
TODAY = dt.date(2026, 11, 30)


@pytest.mark.parametrize("asked", [None, "name", "email", "topic"])
@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hi! My name is Ada Lovelace", {"name": "Ada Lovelace"}),
        ("I'm Ada", {"name": "Ada"}),
        ("we are 4 people", {"party_size": "4"}),
        ("on 3 March", {"preferred_date": "2027-03-03"}),
        ("call me at +44 20 7946 0958", {"phone": "+44 20 7946 0958"}),
        ("March 3rd, 2027 please", {"preferred_date": "2027-03-03"}),
        ("a table for 6 on 1 December", {"party_size": "6", "preferred_date": "2026-12-01"}),
        (
            "Hello, I'm Ada Lovelace, ada@example.com, 3 guests on 12 Jan, it's about billing",
            {
                "name": "Ada Lovelace",
                "email": "ada@example.com",
                "party_size": "3",
                "preferred_date": "2027-01-12",
                "topic": "billing",
            },
        ),
    ],
)
def test_volunteered_values_fill_the_right_fields_on_any_turn(asked, text, expected):
    found = extract_values(FORM, {}, asked, text, today=TODAY)
    assert {k: v for k, v in found.items() if k in expected} == expected, found


@pytest.mark.parametrize("text", ["Hello", "hi there", "I'm fine", "this is great", "2025-06-01"])
def test_chatter_fills_nothing_when_nothing_was_asked(text):
    found = extract_values(FORM, {}, None, text, today=TODAY)
    assert "name" not in found and "phone" not in found, found


def test_enum_matching_prefers_the_longest_whole_word_option():
    form = [
        {
            "name": "city",
            "type": "enum",
            "required": True,
            "description": "",
            "enum": ["York", "New York", "Yorkshire"],
        },
    ]
    assert extract_values(form, {}, None, "moving to new york soon") == {"city": "new york"}
    assert extract_values(form, {}, None, "visiting Yorkshire") == {"city": "Yorkshire"}
    assert extract_values(form, {}, None, "Yorkies") == {}


# --- bounded cost (docs/graphs.md, "The offline model's extraction") --------------------

ISSUE_FORM = [
    {
        "name": f"f{i}",
        "type": "enum",
        "required": True,
        "description": "",
        "enum": [f"{'o' * 190}{i}-{j:03d}" for j in range(100)],
    }
    for i in range(50)
]
HOSTILE_TEXTS = {
    "issue": ("o" * 199 + " ") * 80,
    "words": "x " * 8000,
    "email_run": "a" * 16_000,
    "at_run": "a@" * 8000,
    "digits": "1 " * 8000,
    "phone_like": "+1" * 8000,
    "intros": "my name is " * 1454,
    "dates": "1-2-3 " * 2666,
}


@pytest.mark.parametrize("text", HOSTILE_TEXTS.values(), ids=HOSTILE_TEXTS.keys())
def test_extraction_is_fast_on_the_largest_inputs(text):
    """The issue's request (50 enum fields x 100 options x 200 characters and
    a 16,000-character message) took ~10 s per turn; patterns that scanned
    a run of letters from every position of it took 0.25 s each."""
    form = ISSUE_FORM + FORM
    # CPU time, so other processes on the machine do not count.
    started = time.process_time()
    for asked in ("f0", "email", "party_size"):
        extract_values(form, {}, asked, text[:16_000], today=TODAY)
    elapsed = (time.process_time() - started) / 3
    assert elapsed < 0.3, f"{elapsed:.3f} s of CPU per extraction"


def test_a_form_over_the_size_limit_is_refused():
    with pytest.raises(FormSpecError, match="at most 65536 bytes"):
        check_form_size(ISSUE_FORM)
    check_form_size(FORM)


async def test_the_model_works_off_the_event_loop(monkeypatch):
    """A turn's model work runs in a worker thread: the loop keeps ticking."""

    def slow_respond(messages):
        time.sleep(0.5)  # CPU-bound work, as the loop sees it
        return "{}"

    monkeypatch.setattr(offline, "respond", slow_respond)
    prompt = [
        SystemMessage(render_task(TASK_EXTRACT, {"form": FORM, "fields": {}, "asked_field": None})),
        HumanMessage("hi"),
    ]
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.ensure_future(ticker())
    try:
        chunks = [chunk async for chunk in offline.OfflineChatModel().astream(prompt)]
    finally:
        task.cancel()
    assert json.loads("".join(message_text(c) for c in chunks)) == {}
    assert ticks >= 20, f"the loop ticked {ticks} times in 0.5 s"
