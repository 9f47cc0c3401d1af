"""Every operation of /langgraph/openapi.json says which errors it answers
(langgraph_app.openapi.STATUSES): a route added without its entry documents
only its 200, which the fuzz test (tests/system/test_openapi_fuzz.py) finds
only minutes into a pass; this finds it at once."""

from langgraph_app import openapi
from langgraph_app.api import api


def test_every_operation_lists_its_error_statuses():
    document = api.get_openapi_schema(path_prefix="/langgraph")
    operations = [
        f"{method} {path.removeprefix('/langgraph')}" for path, ops in document["paths"].items() for method in ops
    ]
    assert len(operations) > 40
    assert [where for where in operations if where not in openapi.STATUSES] == []
    for path, ops in document["paths"].items():
        for method, operation in ops.items():
            assert "401" in operation["responses"] or path.endswith(("/ok", "/info")), f"{method} {path}"
