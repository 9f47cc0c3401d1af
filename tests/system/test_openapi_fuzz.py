"""Both OpenAPI documents (/api/ and /langgraph/) against the running server
(docs/api.md, "Overview"; docs/agent-protocol.md, "Streams and errors"):
schemathesis, every check, its coverage, fuzzing and stateful phases, with an
API key: no 5xx, no undocumented status, no valid request refused outside the
documented 4xx, no invalid one accepted. Against a real daphne process on
the test database — through the edge, the server
guard and the SSE consumers, which an in-process ASGI run would partly skip.

Bounded: a fixed number of examples per operation and a fixed seed, so a
failure reproduces (`st replay`, or this test again) and CI time stays known.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sessions_app.services import api_key_create

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]

MAX_EXAMPLES = 15
SEED = 20261130

# positive_data_acceptance sends schema-valid requests and expects them
# accepted. Some rules cannot be said in a static schema: which fields exist
# depends on the session's form (422 invalid_fields), a form's semantic rules
# (unique names, options only on enums: 422 invalid_form), NUL and lone
# surrogates in any string (422), the version a PATCH must match (412/428).
# Those answers are the API working as documented, so they count as accepted.
#
# fork and rewind name a turn in their body, and a session just created has
# none: schemathesis links the session key from POST /api/sessions but makes
# up the turn_id, and takes the documented 404 turn_not_found for the
# session having vanished (ST302). A bad *session* key on them is still
# checked by every other operation's links.
# Every check runs by default (schemathesis 4); naming them with `--checks
# all` would override the per-operation table below.
CONFIG = """\
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "401", "404", "409", "412", "422", "428", "429"]

[[operations]]
include-path-regex = "/(fork|rewind)$"
checks.ensure_resource_availability.enabled = false
"""


# Each document with its own security scheme's header: schemathesis fills
# in a scheme it is not given, and a made-up x-api-key wins over a bearer.
DOCUMENTS = {
    "/api/openapi.json": "Authorization: Bearer {key}",
    "/langgraph/openapi.json": "x-api-key: {key}",
}


@pytest.mark.parametrize("document", DOCUMENTS)
def test_schemathesis_runs_clean(servers, tmp_path, document):
    server = servers()
    key = api_key_create(owner="fuzz")[1]
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "--config-file",
        str(config),
        "run",
        f"{server.url}{document}",
        "--phases",
        "coverage,fuzzing,stateful",
        "--header",
        DOCUMENTS[document].format(key=key),
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--workers",
        "1",
        "--request-timeout",
        "20",
        "--no-color",
    ]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    print(output[-3000:])
    assert result.returncode == 0, output[-8000:] + "\n--- server log ---\n" + server.log_text()[-3000:]
    selected = re.search(r"Selected: (\d+)/(\d+)", output)
    assert selected and selected.group(1) == selected.group(2), output[-3000:]
    assert f"Tested: {selected.group(1)}" in output and "✅ Stateful" in output, output[-3000:]
