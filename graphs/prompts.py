"""The prompts the intake graph sends, in one format for every model.

Each system prompt is natural-language instructions followed by two
machine-readable lines:

    AGENTSITE_TASK: <extract|reply>
    AGENTSITE_INPUT: <one-line JSON object>

A real LLM follows the instructions; the offline model parses the two lines
exactly (`parse_task`), so both run the same graph.
"""

from __future__ import annotations

import json
import re
from typing import Any

TASK_EXTRACT = "extract"
TASK_REPLY = "reply"

_TASK_RE = re.compile(r"^AGENTSITE_TASK: (?P<task>\w+)$", re.MULTILINE)
_INPUT_RE = re.compile(r"^AGENTSITE_INPUT: (?P<payload>.*)$", re.MULTILINE)

_EXTRACT_INSTRUCTIONS = """\
You extract form field values from the user's latest message.
The form, the values already filled in and the field the assistant last asked
for are given as JSON below. Reply with ONLY a JSON object mapping field names
to the values found in the user's message, e.g. {"email": "ada@example.com"}.
Include only fields whose values the message states; use {} if there are none.
Copy values as the user wrote them; do not invent or correct them (validation
happens later). Dates are YYYY-MM-DD. Enum fields take one of their options.
A bare answer (a number, yes/no, a name) belongs to the field last asked for."""

_REPLY_INSTRUCTIONS = """\
You are a friendly assistant filling in a form through conversation.
The JSON below holds the form, the values filled in so far, the required
fields still missing (in the order to ask them), values rejected this turn
(with the reason) and the client mode. Write one short reply:
- for each rejected value, say it is not valid and why;
- if fields are missing, ask for the first missing one using its description
  (in "chat" mode you may thank or greet the user first; in "form" mode just ask);
- if nothing is missing, thank the user and list the values collected.
Never claim a value was saved unless it appears in "fields"."""


def render_task(task: str, payload: dict[str, Any], *, instructions: str | None = None) -> str:
    """A system prompt: `instructions` (the intake tasks have their own) and
    the two machine-readable lines."""
    if instructions is None:
        instructions = _EXTRACT_INSTRUCTIONS if task == TASK_EXTRACT else _REPLY_INSTRUCTIONS
    # json.dumps escapes newlines, so the payload always stays on one line.
    encoded = json.dumps(payload, ensure_ascii=False)
    return f"{instructions}\n\nAGENTSITE_TASK: {task}\nAGENTSITE_INPUT: {encoded}"


def parse_task(text: str) -> tuple[str, dict[str, Any]] | None:
    """Return (task, payload) from a rendered prompt, or None if it is not one."""
    task = _TASK_RE.search(text)
    payload = _INPUT_RE.search(text)
    if task is None or payload is None:
        return None
    try:
        data = json.loads(payload["payload"])
    except json.JSONDecodeError:
        return None
    return (task["task"], data) if isinstance(data, dict) else None
