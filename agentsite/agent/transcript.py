"""Conversation <-> JSON, for the session snapshot the protocol stores."""

from __future__ import annotations

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage

_ROLES: dict[type[BaseMessage], str] = {HumanMessage: "user", AIMessage: "assistant"}
_CLASSES = {role: cls for cls, role in _ROLES.items()}


def messages_to_transcript(messages: list[AnyMessage]) -> list[dict[str, str]]:
    transcript = []
    for message in messages:
        role = next((r for cls, r in _ROLES.items() if isinstance(message, cls)), None)
        if role is None:
            raise ValueError(f"cannot store a {type(message).__name__} in a transcript")
        content = message.content if isinstance(message.content, str) else message.text
        transcript.append({"role": role, "content": content})
    return transcript


def transcript_to_messages(transcript: list[dict[str, str]]) -> list[AnyMessage]:
    messages: list[AnyMessage] = []
    for entry in transcript:
        cls = _CLASSES.get(entry["role"])
        if cls is None:
            raise ValueError(f"unknown transcript role {entry['role']!r}")
        messages.append(cls(content=entry["content"]))
    return messages
