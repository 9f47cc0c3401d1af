"""What the tests read from a chat model's messages."""

from __future__ import annotations

from langchain_core.messages import BaseMessage


def message_text(message: BaseMessage) -> str:
    """A message's content. Every model these tests run answers in plain
    strings; a list of content blocks would be a bug they should see."""
    assert isinstance(message.content, str), message.content
    return message.content
