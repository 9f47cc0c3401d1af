"""A reviewer's answer to the booking graph's pause, as the decisions
LangChain's human-in-the-loop middleware acts on — one per action asked
about (docs/graphs.md, "The booking graph").

Read, in this order:

* LangChain's `{"decisions": [...]}`, one decision per action request:
  `{"type": "approve"}`, `{"type": "edit", "edited_action": {"name",
  "args"}}` (the name is the asked action's; `args` replace the proposed
  ones), `{"type": "reject", "message": "…"}` (the message is optional);
* one such decision alone, when one action is asked about;
* agentsite's older answers: `{"action": "approve"}`, `{"action": "edit",
  "args": {…}}` (merged into the proposed arguments) and `{"action":
  "reject", "reason": "…"}` (the reason is optional); they apply to every
  action asked about.

Anything else — or a decision of the wrong type, or the wrong number of
them — rejects the action it stands for, saying why: nothing is done on an
answer that cannot be read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware.human_in_the_loop import ActionRequest, Decision

UNREADABLE = "the answer was not approve, edit or reject"


def decisions_from(answer: Any, requests: Sequence[ActionRequest]) -> list[Decision]:
    """One decision per request, in order."""
    if isinstance(answer, dict) and "decisions" in answer:
        given = answer["decisions"]
        if not isinstance(given, list) or len(given) != len(requests):
            count = len(given) if isinstance(given, list) else "no list of"
            return [_reject(f"{count} decisions for {len(requests)} actions") for _ in requests]
        return [_decision(d, r) for d, r in zip(given, requests, strict=True)]
    if isinstance(answer, dict) and "type" in answer and len(requests) == 1:
        return [_decision(answer, requests[0])]
    if isinstance(answer, dict) and "action" in answer:
        return [_older(answer, r) for r in requests]
    return [_reject(UNREADABLE) for _ in requests]


def _decision(given: Any, request: ActionRequest) -> Decision:
    kind = given.get("type") if isinstance(given, dict) else None
    if kind == "approve":
        return {"type": "approve"}
    if kind == "reject":
        return _reject(given.get("message"))
    if kind == "edit":
        action = given.get("edited_action")
        if not isinstance(action, dict) or not isinstance(action.get("args"), dict):
            return _reject("an edit needs edited_action with its args")
        if action.get("name", request["name"]) != request["name"]:
            return _reject(f"an edit may change {request['name']}'s arguments, not the action")
        return {"type": "edit", "edited_action": {"name": request["name"], "args": action["args"]}}
    return _reject(UNREADABLE)


def _older(given: dict[str, Any], request: ActionRequest) -> Decision:
    action = given.get("action")
    if action == "approve":
        return {"type": "approve"}
    if action == "reject":
        return _reject(given.get("reason"))
    if action == "edit" and isinstance(given.get("args"), dict):
        args = {**request["args"], **given["args"]}
        return {"type": "edit", "edited_action": {"name": request["name"], "args": args}}
    return _reject(UNREADABLE)


def _reject(message: Any) -> Decision:
    # A reason is welcome, not required (the middleware words a reject without one).
    if isinstance(message, str) and message.strip():
        return {"type": "reject", "message": message.strip()[:500]}
    return {"type": "reject"}
