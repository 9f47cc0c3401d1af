"""How the offline model (AGENT_MODEL=offline) plays the booking agent:
deterministically, from the conversation, with real tool calls — so the
booking graph runs, tools and approvals included, with no network."""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

_DATE = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?!\d)")
_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3])[:.]([0-5]\d)(?![\d:])")
_TIME_12H = re.compile(r"(?<!\d)(1[0-2]|[1-9])\s*(am|pm)\b", re.IGNORECASE)
_PARTY = re.compile(
    r"\b(?:for|party of|table for)\s+(\d{1,2})\b(?!\s*(?:am|pm|:))|\b(\d{1,2})\s+(?:people|persons|guests|of us)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"\b(?:my name is|name is|name:|under the name|under|i am|i'm)\s+([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?)")
_TOOL_RESPONSE = "Tool response:"
_REJECT_REASON = re.compile(r"^User rejected the tool call for `\w+` with reason: (.*)$", re.DOTALL)
_ASK = {
    "name": "the name for the booking",
    "date": "the date (YYYY-MM-DD)",
    "time": "the time (HH:MM)",
    "party_size": "how many people",
}


def details(text: str) -> dict[str, Any]:
    """Booking details a message states."""
    found: dict[str, Any] = {}
    if date := _DATE.search(text):
        found["date"] = date[1]
    if at := _TIME.search(text.replace(found.get("date", "\0"), " ")):
        found["time"] = f"{int(at[1]):02d}:{at[2]}"
    elif at := _TIME_12H.search(text):
        hour = int(at[1]) % 12 + (12 if at[2].lower() == "pm" else 0)
        found["time"] = f"{hour:02d}:00"
    if party := _PARTY.search(text):
        found["party_size"] = int(party[1] or party[2])
    if name := _NAME.search(text):
        found["name"] = name[1]
    return found


def booking_answer(messages: list[BaseMessage], payload: dict[str, Any]) -> str | AIMessage:
    conversation = [m for m in messages if not isinstance(m, SystemMessage)]
    last = conversation[-1] if conversation else None
    if isinstance(last, ToolMessage):
        return _after_tool(last, conversation)
    wanted = _gathered(conversation)
    missing = [k for k in _ASK if k not in wanted]
    if missing:
        return "I can book a table for you. Please tell me " + _listed([_ASK[k] for k in missing]) + "."
    args = {k: wanted[k] for k in ("date", "time", "party_size")}
    return _call("check_availability", args, conversation)


def _gathered(conversation: list[BaseMessage]) -> dict[str, Any]:
    """Details from the user's messages since the last booking attempt
    ended (later messages win)."""
    start = 0
    for index, message in enumerate(conversation):
        if isinstance(message, ToolMessage) and message.name == "book_table":
            start = index + 1
    wanted: dict[str, Any] = {}
    for message in conversation[start:]:
        if isinstance(message, HumanMessage):
            wanted.update(details(message.text))
    return wanted


def _tool_data(result: ToolMessage) -> dict[str, Any]:
    """A tool's JSON answer; after a reviewer's edit the middleware puts its
    notice before it ("… Tool response:")."""
    text = result.text.rsplit(_TOOL_RESPONSE, 1)[-1]
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _refusal(result: ToolMessage) -> str:
    """Why a tool call did not run: the middleware words a reviewer's reject
    (with their reason, if any); ToolNode words arguments it refused."""
    reason = _REJECT_REASON.search(result.text)
    if reason:
        return f"not approved: {reason[1].strip()}"
    if result.text.startswith("Error invoking tool"):
        return "the booking's details were not valid"
    return "it was not approved"


def _after_tool(result: ToolMessage, conversation: list[BaseMessage]) -> str | AIMessage:
    data = _tool_data(result)
    if result.name == "check_availability":
        if data.get("available"):
            wanted = _gathered(conversation)
            args = {k: data.get(k, wanted.get(k)) for k in ("date", "time", "party_size")}
            return _call("book_table", {"name": wanted.get("name"), **args}, conversation)
        return (
            f"Sorry, there is no table for {data.get('party_size')} on {data.get('date')} at "
            f"{data.get('time')}. Would another time suit you?"
        )
    if data.get("booked"):
        return (
            f"Done! Your table for {data['party_size']} on {data['date']} at {data['time']} is booked "
            f"under {data['name']}, reference {data['reference']}."
        )
    return f"All right, I have not booked it ({data.get('reason') or _refusal(result)})."


def _call(name: str, args: dict[str, Any], conversation: list[BaseMessage]) -> AIMessage:
    number = sum(isinstance(m, AIMessage) for m in conversation) + 1
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{name}_{number}"}])


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
