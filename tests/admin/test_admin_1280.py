"""The admin at 1280 px in headless Chromium: session keys and other short
values stay on one line, no column is cut off, a turn row is one line
("#2 · committed"), pages name a session by its key (not its UUID) and the
breadcrumbs do not repeat a name ("Agent sessions › Agent sessions").
Screenshots of each page land in artifacts/<database>/admin-1280-*.png."""

from __future__ import annotations

import itertools

import pytest

from sessions_app.services import api_key_create, session_delete
from tests.admin.conftest import admin_url, session_with_turns
from tests.browser import artifacts_dir, launch_chromium
from turns_app.models import AgentTurn

pytestmark = [pytest.mark.system, pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = artifacts_dir()
WIDTH = 1280

# Cells whose content is wider than the cell (cut off, or spilling over).
OVERFLOWING = """() => [...document.querySelectorAll('#content td, #content th')]
  .filter(c => c.offsetParent !== null && c.scrollWidth > c.clientWidth + 1)
  .map(c => c.className + ': ' + c.innerText.slice(0, 40))"""
# Elements of `selector` whose text takes more than one line (the tops of
# their text lines, 3 px apart or more).
WRAPPED = """(selector) => [...document.querySelectorAll(selector)]
  .filter(e => e.offsetParent !== null && e.innerText.trim() !== '')
  .filter(e => {
    const walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
    const tops = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim()) continue;
      const range = document.createRange(); range.selectNodeContents(node);
      for (const r of range.getClientRects()) tops.push(r.top);
    }
    return tops.some(t => Math.abs(t - tops[0]) >= 3);
  })
  .map(e => e.innerText)"""


def breadcrumbs(page) -> str:
    return " ".join(page.locator("div.breadcrumbs").inner_text().split())


def test_admin_pages_at_1280(live_server, admin_user, api):
    from playwright.sync_api import sync_playwright

    key = "booking-2031-01-02-ada-lovelace-party-of-three"
    session = session_with_turns(api, key, turns=4)
    gone = session_with_turns(api, "deleted-session-key-0001", turns=1)
    session_delete(session_id=gone.pk)
    for owner in ("alice", "bob-the-operator-with-a-long-name"):
        api_key_create(owner=owner)
    turn = AgentTurn.objects.filter(session=session).order_by("-number").first()
    pages = {
        "sessions": admin_url("sessions_app_agentsession_changelist") + "?state=all",
        "session": admin_url("sessions_app_agentsession_change", session.pk),
        "turns": admin_url("turns_app_agentturn_changelist"),
        "turn": admin_url("turns_app_agentturn_change", turn.pk),
        "keys": admin_url("sessions_app_apikey_changelist"),
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    problems: dict[str, object] = {}

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(f"{live_server.url}/admin/login/?next=/admin/")
            page.fill("#id_username", admin_user.username)
            page.fill("#id_password", "password")
            page.click("input[type=submit]")
            page.wait_for_url(f"{live_server.url}/admin/")
            for name, path in pages.items():
                page.goto(f"{live_server.url}{path}")
                page.screenshot(path=str(ARTIFACTS / f"admin-1280-{name}.png"), full_page=True)
                crumbs = breadcrumbs(page)
                parts = [p.strip() for p in crumbs.split("›")]
                if any(a == b for a, b in itertools.pairwise(parts)):
                    problems[f"{name}: repeated breadcrumb"] = crumbs
                if (
                    str(session.pk) in crumbs
                    or str(session.pk) in page.locator("#content h2, #content h1").all_inner_texts().__str__()
                ):
                    problems[f"{name}: UUID in the title"] = crumbs
                clipped = page.evaluate(
                    "() => [...document.querySelectorAll('#changelist .results, #content .tabular')]"
                    ".filter(e => e.scrollWidth > e.clientWidth + 1).length"
                )
                if clipped:
                    problems[f"{name}: table wider than the page (columns scrolled out)"] = clipped
                if overflowing := page.evaluate(OVERFLOWING):
                    problems[f"{name}: cut-off cells"] = overflowing
                wrapped = page.evaluate(
                    WRAPPED,
                    "td.field-key, th.field-key, td.field-owner, td.field-idempotency_key, "
                    "td.field-created_at, td.field-finished_at, td.field-last_activity, "
                    "td.field-prefix, td.field-session_key, th.field-session_key, th.field-turn_label, "
                    "td.field-turn_label, td.field-idempotency, #turns-group tr.has_original td",
                )
                if wrapped:
                    problems[f"{name}: wrapped"] = wrapped
                if name == "session":
                    head = " ".join(page.locator(".field-head_turn .readonly").inner_text().split())
                    if head != "#4 · committed":
                        problems["session: head turn shown as"] = head
                    rows = page.locator("#turns-group tbody tr.has_original")
                    assert rows.count() == 4
                    first = " ".join(rows.first.inner_text().split())
                    if not first.startswith("#4 · committed"):
                        problems["session: turn row"] = first
                    if (
                        page.locator("#turns-group tbody tr.has_original td.original p")
                        .filter(has_text="of")
                        .locator("visible=true")
                        .count()
                    ):
                        problems["session: turn rows carry a second title line"] = True
        finally:
            browser.close()
    assert problems == {}
