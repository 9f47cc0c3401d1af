"""A fork into a deleted (tombstoned) key: the version is never reset, not
even by delete (docs/invariants.md, "5. Delete leaves a tombstone"), so an
If-Match the old session's client holds must not match the fork, and the
fork's own versions go on from there."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def body(response) -> Any:
    return json.loads(response.content)


async def chats(api, key: str, texts) -> list[dict]:
    answers = []
    for text in texts:
        response = await api.chat(key, text)
        assert response.status_code == 200, response.content
        answers.append(body(response))
    return answers


async def a_tombstone(api, key: str, turns: int) -> int:
    """`key` deleted after `turns` turns; the version its client last read."""
    await chats(api, key, ["hello", "Ada Lovelace", "ada@example.com"][:turns])
    version = body(await api.call("GET", f"/sessions/{key}"))["version"]
    assert version == turns
    assert (await api.call("DELETE", f"/sessions/{key}")).status_code == 204
    return version


async def set_fields(api, key: str, version: int):
    headers = {"If-Match": f'"{version}"'}
    return await api.call("PATCH", f"/sessions/{key}/fields", {"fields": {"name": "Mallory"}}, headers)


@pytest.mark.parametrize("from_turn", [None, 1, 2])
async def test_a_fork_into_a_deleted_key_never_moves_its_version_back(api, script, from_turn):
    source = await chats(api, "src", ["hello", "Ada Lovelace"])
    old = await a_tombstone(api, "old", 3)
    turn_id = source[from_turn - 1]["turn_id"] if from_turn else None
    forked = await api.call("POST", "/sessions/src/fork", {"turn_id": turn_id, "new_key": "old"})
    assert forked.status_code == 201, forked.content
    version = body(forked)["version"]
    assert version > old, (version, old)
    # No version the old session's client ever read matches the fork.
    for stale in range(old + 1):
        refused = await set_fields(api, "old", stale)
        assert refused.status_code == 412 and body(refused)["error"]["code"] == "version_conflict", refused.content
    # The copied turns' versions lead up to the fork's, one per turn.
    history = body(await api.call("GET", "/sessions/old/history?limit=50"))["items"]
    assert [item["version"] for item in reversed(history)] == list(range(version - len(history) + 1, version + 1))
    assert all(item["version"] > old for item in history)
    # And the fork goes on from there: a turn, a set-fields at its version.
    (turn,) = await chats(api, "old", ["grace@example.com"])
    assert turn["version"] == version + 1
    assert (await set_fields(api, "old", version + 1)).status_code == 200


async def test_a_fork_into_a_new_key_starts_at_its_chain(api, script):
    source = await chats(api, "src", ["hello", "Ada Lovelace"])
    forked = await api.call("POST", "/sessions/src/fork", {"turn_id": source[1]["turn_id"], "new_key": "fresh"})
    assert forked.status_code == 201 and body(forked)["version"] == 2, forked.content
