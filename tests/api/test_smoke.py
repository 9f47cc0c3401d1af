import json

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


async def test_chat_then_info(api):
    response = await api.chat("s1", "hello")
    assert response.status_code == 200, response.content
    body = json.loads(response.content)
    assert body["version"] == 1
    info = await api.call("GET", "/sessions/s1")
    assert info.status_code == 200
    assert json.loads(info.content)["version"] == 1


async def test_list(api):
    await api.chat("s1", "hello")
    response = await api.call("GET", "/sessions")
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["count"] == 1
