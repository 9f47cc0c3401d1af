"""The harness that runs LangGraph's own Python SDK integration suite
(`langgraph_sdk_integration/`, vendored unmodified) against a real daphne of
agentsite (docs/agent-protocol.md, "Conformance").

The suite expects a LangGraph server with its four test graphs registered, no
auth, at LANGGRAPH_INTEGRATION_URL. Here:

* one daphne for the whole suite, on a fresh database of the suite's backend
  (migrated, dropped afterwards; the tests never touch it themselves), with
  the suite's graphs registered by its own langgraph.json
  (AGENT_LANGGRAPH_JSON, unmodified: graphs by file, a factory among them)
  and AGENT_PROTOCOL_DEFAULT_KEY set to a key of the owner `sdk-suite`,
  since the suite's clients send no key;
* LANGGRAPH_INTEGRATION_URL is set before the suite's conftest reads it (this
  conftest is imported first); test_remote_graph_v3.py hard-codes
  `http://localhost:2024` instead of reading it, so its `URL` is pointed at
  the same server (the one adaptation, made here, not in the file);
* every test gets a ceiling (TEST_SECONDS): a client waiting on an event the
  server never sends fails instead of hanging CI;
* the tests agentsite does not pass yet are strict xfails by test id
  (expected_failures.py): a test that starts passing fails the run until its
  entry is removed; the few that race inside the SDK itself are rerun
  (expected_failures.py, SDK_RACES, says how they race);
* the server is session-scoped, so it is up before the suite's own
  session fixture asks `/ok` (which would skip the whole suite otherwise; a
  skip in the suite is reported as a failure here).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.fixtures.own_server import server_on_own_database
from tests.system.server import Server, free_port
from tests.vendor.expected_failures import EXPECTED_FAILURES, RACE_RERUNS, SDK_RACES

SUITE = Path(__file__).resolve().parent / "langgraph_sdk_integration"
# The suite's own langgraph.json registers its graphs, as `langgraph dev`
# reads it: by file, its graph folder a dependency (deep_agent's
# `deepagents` is pinned in requirements-dev.txt).
PROJECT = SUITE / "integration" / "langgraph.json"
TEST_SECONDS = 60
OWNER = "sdk-suite"
# Keys a LangGraph client would send from the environment (get_client reads
# them): the suite runs as an auth-less client, so none may leak in.
CLIENT_KEY_VARIABLES = ("LANGGRAPH_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY")

SERVERS: list[Server] = []
LOG_START = pytest.StashKey[int]()

PORT = free_port()
URL = f"http://127.0.0.1:{PORT}/langgraph"
os.environ["LANGGRAPH_INTEGRATION_URL"] = URL


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: LangGraph's SDK integration suite (tests/vendor)")


def in_suite(item: pytest.Item) -> bool:
    return Path(str(item.path)).is_relative_to(SUITE)


def suite_key(item: pytest.Item) -> str:
    return f"{Path(str(item.path)).name}::{item.name}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    suite = [item for item in items if in_suite(item)]
    collected = {suite_key(item) for item in suite}
    files = {key.partition("::")[0] for key in collected}
    named = {**EXPECTED_FAILURES, **SDK_RACES}
    stale = sorted(k for k in named if k.partition("::")[0] in files and k not in collected)
    if stale:
        raise pytest.UsageError(f"tests/vendor/expected_failures.py names tests the suite does not have: {stale}")
    for item in suite:
        item.add_marker(pytest.mark.system)
        reason = EXPECTED_FAILURES.get(suite_key(item))
        if reason is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))
        if suite_key(item) in SDK_RACES:
            # pytest-rerunfailures: a race in the client, not a result.
            item.add_marker(pytest.mark.flaky(reruns=RACE_RERUNS))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A skip is not a result: the suite skips itself when it cannot reach
    the server, which here means the harness is broken."""
    report = yield
    if not in_suite(item):
        return report
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, which the harness counts as a failure: {report.longrepr}"
    server = SERVERS[0] if SERVERS else None
    if server is not None and report.when == "call":
        # What the server answered during this test (its access log and
        # errors), shown with a failure as pytest shows captured output.
        start = item.stash.get(LOG_START, 0)
        report.sections.append(("agentsite server log", server.log_text()[start:][-20_000:]))
    return report


class Ceiling(Exception):
    pass


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """SIGALRM after TEST_SECONDS: the test (sync, or its event loop, both on
    the main thread) is interrupted where it waits and fails."""
    if not in_suite(item):
        return (yield)

    def expire(signum, frame):
        raise Ceiling(f"{suite_key(item)} did not finish within {TEST_SECONDS} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, TEST_SECONDS)
    try:
        return (yield)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="session", autouse=True)
def agentsite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = {"AGENT_LANGGRAPH_JSON": str(PROJECT)}
    folder = tmp_path_factory.mktemp("sdk-suite")
    with pytest.MonkeyPatch.context() as patch:
        for name in CLIENT_KEY_VARIABLES:
            patch.delenv(name, raising=False)
        with server_on_own_database(folder, owner=OWNER, env=env, port=PORT, default_key=True) as (server, _):
            SERVERS.append(server)
            try:
                yield server
            finally:
                SERVERS.clear()


@pytest.fixture(autouse=True)
def _suite_test(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, agentsite_server: Server) -> None:
    request.node.stash[LOG_START] = len(agentsite_server.log_text())
    if request.module.__name__.rpartition(".")[2] == "test_remote_graph_v3":
        monkeypatch.setattr(request.module, "URL", URL)
