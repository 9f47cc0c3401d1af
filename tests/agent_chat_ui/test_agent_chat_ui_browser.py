"""LangGraph's agent-chat-ui (tests/vendor/agent-chat-ui, unmodified, built
once by tests/agent_chat_ui/build.py and served by `next start`) in headless
Chromium (tests/browser.py finds it) against one real daphne: the booking
graph's approval through the UI's own Approve / Edit / Reject widget
(LangChain's human-in-the-loop request and decisions), a reload while the
graph waits, several threads, and both ways the UI reaches a server —
straight from the browser (CORS, LANGGRAPH_CORS_ALLOWED_ORIGINS, the key in
the UI's settings form) and through its Next.js API passthrough
(LANGGRAPH_API_URL, the key injected on the server side). Checked in the
page, then in the database: one booking per approved call, as edited, none
for a rejection. Keeps artifacts/<database>/agent-chat-ui-*.png.

Playwright's sync API refuses to run inside an event loop, so this test is
sync, and the database is read after the browser block."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from graphs.booking.models import Booking
from sessions_app.models import AgentSession
from sessions_app.services import api_key_create
from tests.agent_chat_ui.build import built
from tests.browser import artifacts_dir, launch_chromium
from tests.system.server import free_port

pytestmark = [pytest.mark.system, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = artifacts_dir()
STARTUP_SECONDS = 60.0
# The offline model plays the booking agent from these (tests/system/test_booking.py).
BOOK_APPROVED = "Book a table for 3 people on 2031-06-01 at 20:00, my name is Ada Lovelace"
BOOK_EDITED = "Book a table for 2 people on 2031-06-04 at 19:00, my name is Ada Lovelace"
BOOK_REJECTED = "Book a table for 2 people on 2031-06-02 at 19:30, my name is Grace Hopper"
BOOK_RELOADED = "Book a table for 4 people on 2031-06-03 at 18:00, my name is Alan Turing"
BOOK_PROXIED = "Book a table for 5 people on 2031-06-05 at 21:00, my name is Mary Somerville"


class NextServer:
    """`next start` of the built UI on a free loopback port, in a process
    group of its own that stop() ends whole."""

    def __init__(self, directory: Path, log_path: Path, port: int, env: dict[str, str]) -> None:
        self.port = port
        self.directory = directory
        self.log_path = log_path
        self.env = {**os.environ, "NEXT_TELEMETRY_DISABLED": "1", **env}
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        next_bin = self.directory / "node_modules" / ".bin" / "next"
        command = [str(next_bin), "start", "-H", "127.0.0.1", "-p", str(self.port)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                command,
                cwd=self.directory,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            assert self.process.poll() is None, f"next start exited:\n{self.log_text()}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url, timeout=2).status_code == 200:
                    return
            assert time.monotonic() < deadline, f"next start not serving within {STARTUP_SECONDS} s:\n{self.log_text()}"
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture
def agent_chat_ui(tmp_path):
    """`agent_chat_ui(port, **env)` starts the UI; it is killed when the test
    ends, whatever happens."""
    directory = built()
    started: list[NextServer] = []

    def start(port: int, **env: str) -> NextServer:
        server = NextServer(directory, tmp_path / f"next-{len(started)}.log", port, env)
        started.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


class Watch:
    """What a page did: script errors, and the protocol requests it sent."""

    def __init__(self, page) -> None:
        self.problems: list[str] = []
        self.requests: list = []
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("console", self._console)
        page.on("response", self._response)

    def _console(self, msg) -> None:
        if msg.type == "error":
            self.problems.append(f"console: {msg.text}")

    def _response(self, response) -> None:
        if "/threads" in response.url or response.url.endswith("/info"):
            self.requests.append(response.request)
            if response.status >= 400:
                self.problems.append(f"{response.status} for {response.request.method} {response.url}")

    def resumes(self) -> list[dict]:
        bodies = [r.post_data_json for r in self.requests if r.method == "POST" and r.url.endswith("/runs/stream")]
        return [body["command"]["resume"] for body in bodies if body.get("command")]


def thread_id(page) -> str:
    [value] = parse_qs(urlparse(page.url).query)["threadId"]
    return value


def ask_for_a_booking(page, text: str) -> str:
    """Send `text` on a new thread; return the thread's id once the review widget shows."""
    from playwright.sync_api import expect

    box = page.get_by_placeholder("Type your message...")
    box.fill(text)
    # The widget starts afresh (an edit begun is lost) whenever the page
    # renders the thread again: after the run, when the UI reads the thread's
    # history, and 4 s after a new thread, when it reloads the thread list
    # (src/providers/Stream.tsx). A person editing within those seconds loses
    # the edit too; the test waits for both reads.
    with (
        page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/threads/search")),
        page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/history")),
    ):
        box.press("Enter")
    expect(page.get_by_text("Edit/Approve", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_enabled()
    page.wait_for_url(re.compile(r"[?&]threadId="))
    return thread_id(page)


def last_answer(page) -> str:
    """The graph's answer after the decision, once the resumed run has ended."""
    from playwright.sync_api import expect

    last = page.get_by_text(re.compile(r"^(Done! Your table|All right, I have not booked it)")).last
    expect(last).to_be_visible()
    expect(page.get_by_text("Edit/Approve", exact=True)).to_have_count(0)  # the widget is gone
    return last.inner_text().strip()


def run_ended(protocol: str, key: str, thread: str) -> None:
    """Blocks until the thread's runs have ended, by joining them. The
    answer is on the page while its tokens stream, before the run commits;
    a new thread then stops the stream the UI still reads, and the UI
    cancels the run it stops (seen on a loaded machine)."""
    headers = {"x-api-key": key}
    runs = httpx.get(f"{protocol}/threads/{thread}/runs", headers=headers, timeout=30)
    assert runs.status_code == 200, runs.text
    for run in runs.json():
        if run["status"] in ("pending", "running"):
            joined = httpx.get(f"{protocol}/threads/{thread}/runs/{run['run_id']}/join", headers=headers, timeout=120)
            assert joined.status_code == 200, joined.text


def new_thread(page) -> None:
    page.get_by_role("button", name="New thread").click()
    page.wait_for_url(lambda url: "threadId=" not in url)


def argument(page, name: str):
    """The edit form's field for one argument of the proposed call."""
    return page.get_by_text(name, exact=True).locator("xpath=following-sibling::textarea")


def test_booking_approval_through_agent_chat_ui_direct_and_through_its_passthrough(servers, agent_chat_ui):
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=45_000)
    key = api_key_create(owner="alice")[1]
    ui_port = free_port()
    # The UI's origin may call /langgraph/ from the browser (CORS).
    server = servers(LANGGRAPH_CORS_ALLOWED_ORIGINS=f"http://127.0.0.1:{ui_port}", AGENT_OFFLINE_TOKEN_DELAY_MS="5")
    protocol = f"{server.url}/langgraph"
    # The passthrough (the UI's /api/ route) adds the key on the server side.
    ui = agent_chat_ui(ui_port, LANGGRAPH_API_URL=protocol, LANGSMITH_API_KEY=key)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shots = {name: ARTIFACTS / f"agent-chat-ui-{name}.png" for name in ("pending", "edit", "reloaded", "passthrough")}
    for shot in shots.values():
        shot.unlink(missing_ok=True)

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            # Direct: the UI's own settings form, then every call from the browser to daphne.
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.set_default_timeout(45_000)
            watch = Watch(page)
            page.goto(ui.url)
            page.fill("#apiUrl", protocol)
            page.fill("#assistantId", "booking")
            page.fill("#apiKey", key)
            page.get_by_role("button", name="Continue").click()

            # Approve.
            approved = ask_for_a_booking(page, BOOK_APPROVED)
            expect(page.get_by_role("cell", name="Ada Lovelace").last).to_be_visible()  # the proposed call's arguments
            page.screenshot(path=str(shots["pending"]), full_page=True)
            page.get_by_role("button", name="Approve", exact=True).click()
            approved_answer = last_answer(page)
            run_ended(protocol, key, approved)

            # A second thread: edit the party size, then submit the edited call.
            new_thread(page)
            edited = ask_for_a_booking(page, BOOK_EDITED)
            assert edited != approved
            expect(argument(page, "Party Size")).to_have_value("2")
            argument(page, "Party Size").fill("6")
            expect(page.get_by_role("button", name="Submit", exact=True)).to_be_visible()
            page.screenshot(path=str(shots["edit"]), full_page=True)
            page.get_by_role("button", name="Submit", exact=True).click()
            edited_answer = last_answer(page)
            run_ended(protocol, key, edited)

            # Reject, with a reason.
            new_thread(page)
            rejected = ask_for_a_booking(page, BOOK_REJECTED)
            page.get_by_placeholder("Share feedback with the agent...").fill("changed my mind")
            page.get_by_role("button", name="Submit rejection").click()
            rejected_answer = last_answer(page)
            run_ended(protocol, key, rejected)

            # A reload while the graph waits shows the widget again, from the server's state.
            new_thread(page)
            reloaded = ask_for_a_booking(page, BOOK_RELOADED)
            with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/history")):
                page.reload()
            expect(page.get_by_text("Edit/Approve", exact=True)).to_be_visible()
            expect(argument(page, "Name")).to_have_value("Alan Turing")
            expect(argument(page, "Party Size")).to_have_value("4")
            page.screenshot(path=str(shots["reloaded"]), full_page=True)
            page.get_by_role("button", name="Approve", exact=True).click()
            reloaded_answer = last_answer(page)
            run_ended(protocol, key, reloaded)
            assert thread_id(page) == reloaded

            # The thread list (threads.search) leads back to the first thread and its answer.
            page.goto(f"{page.url}&chatHistoryOpen=true")  # the list shown, as its toggle keeps it in the URL
            page.get_by_role("button", name=BOOK_APPROVED).first.click()
            page.wait_for_url(re.compile(f"threadId={approved}"))
            expect(page.get_by_text(approved_answer, exact=True)).to_be_visible()
            direct_requests, direct_resumes = list(watch.requests), watch.resumes()
            problems = watch.problems

            # Through the passthrough: the browser holds no key and calls only the UI's origin.
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.set_default_timeout(45_000)
            watch = Watch(page)
            page.goto(f"{ui.url}/?apiUrl={ui.url}/api&assistantId=booking")
            proxied = ask_for_a_booking(page, BOOK_PROXIED)
            page.get_by_role("button", name="Approve", exact=True).click()
            proxied_answer = last_answer(page)
            run_ended(protocol, key, proxied)
            page.screenshot(path=str(shots["passthrough"]), full_page=True)
            proxied_requests, proxied_resumes = list(watch.requests), watch.resumes()
            problems += watch.problems
        finally:
            browser.close()

    assert not problems, problems
    assert "Traceback" not in server.log_text()
    assert direct_requests and all(r.url.startswith(f"{protocol}/") for r in direct_requests)
    assert all(r.headers.get("x-api-key") == key for r in direct_requests)
    assert proxied_requests and all(r.url.startswith(f"{ui.url}/api/") for r in proxied_requests)
    assert not any("x-api-key" in r.headers for r in proxied_requests)
    edited_args = {"name": "Ada Lovelace", "date": "2031-06-04", "time": "19:00", "party_size": "6"}
    assert direct_resumes == [
        {"decisions": [{"type": "approve"}]},
        {"decisions": [{"type": "edit", "edited_action": {"name": "book_table", "args": edited_args}}]},
        {"decisions": [{"type": "reject", "message": "changed my mind"}]},
        {"decisions": [{"type": "approve"}]},
    ]
    assert proxied_resumes == [{"decisions": [{"type": "approve"}]}]

    # The page's answers are the database's rows: one booking per approved
    # call (the edited one as edited), none for the rejection.
    answers = {approved: approved_answer, edited: edited_answer, reloaded: reloaded_answer, proxied: proxied_answer}
    expected = {
        approved: ("Ada Lovelace", 3, "2031-06-01", "20:00"),
        edited: ("Ada Lovelace", 6, "2031-06-04", "19:00"),
        reloaded: ("Alan Turing", 4, "2031-06-03", "18:00"),
        proxied: ("Mary Somerville", 5, "2031-06-05", "21:00"),
    }
    for thread, (name, party, date, at) in expected.items():
        session = AgentSession.objects.get(key=thread)
        assert session.owner == "alice" and session.graph == "booking" and session.interrupt is None
        (booking,) = Booking.objects.filter(session_id=session.id)
        assert (booking.name, booking.party_size, str(booking.date), f"{booking.time:%H:%M}") == (name, party, date, at)
        assert answers[thread] == (
            f"Done! Your table for {party} on {date} at {at} is booked under {name}, reference {booking.reference}."
        )
    rejection = AgentSession.objects.get(key=rejected)
    assert rejection.interrupt is None and not Booking.objects.filter(session_id=rejection.id).exists()
    assert rejected_answer == "All right, I have not booked it (not approved: changed my mind)."
    assert Booking.objects.count() == 4
    for shot in shots.values():
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, (shot, len(data))
