"""The console (`GET /console`) in a real browser, on the local stack: Debian's Chromium driven by
Playwright (console_support.py), Chromium alone (no other browser's driver is installed here).

What a person does in it is done in it: sign in, read the messages and a message's timeline, see the
promise per day with each duplicate linked to its original, add and remove a suppression, watch a
failed status webhook and redeliver it, preview a template, watch a campaign's progress, read the
usage. Each test also holds the tab to what must never happen: no dialog, no script error, no error
in the console, no Content-Security-Policy violation. The last tests check every view under the
policy at 1280 and 360 px (screenshots in tests/e2e/artifacts/console/), for test mode, with the
keyboard, and with axe-core (no serious or critical violation).

One browser for the module; one tab on the live key, reused by every test; the recipients, bodies,
template and campaign names are each test's own, so the suites that share the stack see nothing of
them but a message more.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
import requests
from playwright.sync_api import Browser, expect, sync_playwright

from tests.e2e.console_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    NARROW,
    VIEWS,
    WIDE,
    Console,
    axe_source,
    count_in,
    require_chromium,
)
from tests.e2e.e2e_support import (
    SETTLED,
    call,
    created_id,
    error_code,
    eventually,
    imessage,
    send,
    sms,
    unique_body,
    unique_phone,
    wait_status,
)
from tests.support.http_server import Reply, Request, serving

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    require_chromium()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def console(browser: Browser, stack: LocalStack) -> Iterator[Console]:
    """A tab on the live key's console, signed in once, under the page's own policy."""
    tab = Console.open_tab(browser, stack.api)
    tab.sign_in(stack.api_key)
    yield tab
    tab.close()


@pytest.fixture
def clean(console: Console) -> Iterator[Console]:
    """The tab, held to what must never happen over the whole test."""
    console.watched.clear()
    yield console
    console.assert_clean()


@dataclass
class Receiver:
    """A customer's status-webhook endpoint that refuses (500) until told to take (204)."""

    taking: bool = False
    arrived: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: Request) -> Reply:
        with self.lock:
            self.arrived.append(request.headers.get("webhook-id", "?"))
            return Reply(204 if self.taking else 500)


@pytest.fixture(scope="module")
def endpoint(stack: LocalStack) -> Iterator[tuple[dict[str, Any], Receiver]]:
    """An endpoint of the workspace's own for this module, removed when it ends."""
    receiver = Receiver()
    with serving(receiver) as server:
        answer = call(stack, "POST", "/v1/webhook-endpoints", {"url": f"{server.url}/console-hooks"})
        assert answer.status_code == 201, answer.text
        created: dict[str, Any] = answer.json()["endpoint"]
        try:
            yield created, receiver
        finally:
            call(stack, "DELETE", f"/v1/webhook-endpoints/{created['id']}")


def today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


# ---------------------------------------------------------------------------- the promise
def test_a_duplicate_blocked_is_linked_to_its_original_in_the_promise_view(
    stack: LocalStack, clean: Console
) -> None:
    request = sms(unique_phone(), unique_body("console duplicate"))
    original = created_id(send(stack, request))
    again = send(stack, request)
    assert again.status_code == 200, again.text
    assert again.json()["duplicateOnly"] is True

    clean.go("promise", "The promise")
    blocked = clean.page.locator("section.blocked")
    link = blocked.locator(f'a[href="#/messages/{original}"]')
    row = clean.page.locator(f'tr[data-key="{today()}"]')
    # The event and the day's counts each come from the table's stream: a few seconds, at most.
    clean.refresh_until(
        "The promise",
        lambda: (
            link.count() > 0 and count_in(row, "duplicatesBlocked") >= 1 and count_in(row, "newMessages") >= 1
        ),
    )

    link.first.click()  # the original's own timeline
    clean.wait_for("Message timeline")
    expect(clean.page.locator("main")).to_contain_text(original)
    expect(clean.page.locator("li[data-kind=duplicate_blocked]")).to_have_count(1)


def test_a_delivered_message_shows_its_whole_timeline(stack: LocalStack, clean: Console) -> None:
    # iMessage goes through the sandbox's HTTP provider, which reports each delivery back.
    message_id = created_id(send(stack, imessage(unique_phone(), unique_body("console timeline"))))
    wait_status(stack, message_id, "delivered")

    clean.go(f"messages/{message_id}", "Message timeline")
    entries = clean.page.locator("ol.timeline li")
    clean.refresh_until(
        "Message timeline", lambda: clean.page.locator("li[data-kind=provider_event]").count() > 0
    )

    kinds = [entry.get_attribute("data-kind") for entry in entries.all()]
    assert kinds[0] == "created"
    assert {"created", "status", "provider_attempt", "provider_event"} <= set(kinds)
    assert all(entry.locator("time").count() == 1 for entry in entries.all())  # each with its time
    expect(clean.page.locator("li[data-kind=status]").filter(has_text="delivered")).to_have_count(1)
    expect(clean.page.locator(".summary .badge").first).to_have_text("delivered")


# ---------------------------------------------------------------------------- suppressions
def test_a_suppression_added_in_the_page_refuses_the_next_send_and_is_counted(
    stack: LocalStack, clean: Console
) -> None:
    phone = unique_phone()
    clean.go("promise", "The promise")
    refused_before = count_in(clean.page.locator(f'tr[data-key="{today()}"]'), "refusedSuppressed")

    clean.go("suppressions", "Suppressions")
    clean.page.get_by_label("Channel", exact=True).select_option("sms")
    clean.page.get_by_label("Recipient", exact=True).fill(phone)
    clean.page.get_by_role("button", name="Add suppression").click()
    clean.wait_for("Suppressions")
    expect(clean.page.get_by_role("status").filter(has_text=f"{phone} is suppressed")).to_be_visible()
    expect(clean.page.locator(f'tr[data-key="{phone}"]')).to_contain_text("manual")

    refused = send(stack, sms(phone, unique_body("console suppressed")))
    assert refused.status_code == 422, refused.text
    assert error_code(refused) == "recipient_suppressed"

    clean.go("promise", "The promise")
    row = clean.page.locator(f'tr[data-key="{today()}"]')
    clean.refresh_until("The promise", lambda: count_in(row, "refusedSuppressed") > refused_before)

    clean.go("suppressions", "Suppressions")
    clean.page.get_by_role("button", name=f"Remove {phone}").click()
    clean.wait_for("Suppressions")
    expect(clean.page.locator(f'tr[data-key="{phone}"]')).to_have_count(0)
    created_id(send(stack, sms(phone, unique_body("console allowed again"))))


# ---------------------------------------------------------------------------- escaping
def test_markup_in_a_body_shows_as_text_and_never_runs(stack: LocalStack, clean: Console) -> None:
    phone = unique_phone()
    body = f"<img src=x onerror=alert(1)> {uuid.uuid4()}"
    message_id = created_id(send(stack, sms(phone, body)))
    wait_status(stack, message_id, SETTLED)

    clean.go(f"messages?to={phone.replace('+', '%2B')}", "Messages")
    row = clean.page.locator(f'tr[data-key="{message_id}"]')
    expect(row.locator('td[data-field="content"]')).to_have_text(body)
    clean.go(f"messages/{message_id}", "Message timeline")
    expect(clean.page.locator("pre.body")).to_have_text(body)

    assert clean.page.locator("main img").count() == 0
    # Once more, a moment later: an onerror would have fired by now.
    clean.page.wait_for_timeout(300)
    assert clean.watched.dialogs == []


# ---------------------------------------------------------------------------- status webhooks
def test_a_failed_status_webhook_shows_and_is_redelivered_from_the_page(
    stack: LocalStack, clean: Console, endpoint: tuple[dict[str, Any], Receiver]
) -> None:
    created, receiver = endpoint
    message_id = created_id(send(stack, sms(unique_phone(), unique_body("console webhook"))))

    def failed_events() -> list[str]:
        answer = call(stack, "GET", f"/v1/events?messageId={message_id}")
        return [
            event["id"]
            for event in answer.json()["events"]
            for delivery in event["deliveries"]
            if delivery["endpointId"] == created["id"] and delivery["status"] == "failed"
        ]

    failed = eventually(failed_events)[0]
    receiver.taking = True

    clean.go("webhooks?failures=1", "Status webhooks")
    section = clean.page.locator("section.endpoint").filter(has_text=created["id"])
    row = section.locator(f'tr[data-key="{failed}"]')
    expect(row.locator('td[data-field="delivery"]')).to_have_text("failed")
    row.get_by_role("button", name=f"Redeliver {failed} to {created['id']}").click()
    expect(clean.page.get_by_role("status").filter(has_text="queued")).to_be_visible()

    clean.page.get_by_label("Failures only").uncheck()
    clean.wait_for("Status webhooks")
    clean.refresh_until(
        "Status webhooks",
        lambda: (
            section.locator(f'tr[data-key="{failed}"] td[data-field="delivery"]').inner_text() == "succeeded"
        ),
    )


# ---------------------------------------------------------------------------- templates, campaigns
def test_a_template_previews_as_the_data_is_typed(stack: LocalStack, clean: Console) -> None:
    name = f"console_{uuid.uuid4().hex[:10]}"
    made = call(stack, "POST", "/v1/templates", {"name": name, "channel": "sms", "body": "Hi {{ name }}!"})
    assert made.status_code == 201, made.text

    clean.go(f"templates?name={name}", "Templates")
    expect(clean.page.get_by_role("heading", name=f"Preview: {name}")).to_be_visible()
    clean.page.get_by_label("Data (JSON)").fill(json.dumps({"name": "<b>Ann</b>"}))
    expect(clean.page.locator('[data-field="rendered-body"]')).to_have_text("Hi <b>Ann</b>!")
    clean.page.get_by_label("Data (JSON)").fill("{not json")
    expect(clean.page.locator(".preview .error")).to_contain_text("invalid_json")


def test_a_campaign_shows_its_progress_live(stack: LocalStack, clean: Console) -> None:
    recipients = [{"to": unique_phone()} for _ in range(3)]
    body = {"name": f"console {uuid.uuid4().hex[:8]}", "channel": "sms", "body": unique_body("campaign")}
    made = call(stack, "POST", "/v1/campaigns", {**body, "recipients": recipients})
    assert made.status_code == 201, made.text
    campaign = made.json()["campaign"]["id"]

    clean.go("campaigns", "Campaigns")
    row = clean.page.locator(f'tr[data-key="{campaign}"]')
    expect(row.locator('td[data-field="status"]')).to_have_text("draft")
    assert call(stack, "POST", f"/v1/campaigns/{campaign}/start").status_code == 202

    # No click: the view polls while it is shown.
    expect(row.locator('td[data-field="status"]')).to_have_text("completed", timeout=45_000)
    expect(row.locator('td[data-field="progress"]')).to_contain_text("100% sent (3 of 3)", timeout=45_000)


def test_usage_shows_the_quota_and_the_rate_limit(stack: LocalStack, clean: Console) -> None:
    usage = call(stack, "GET", "/v1/usage").json()

    clean.go("usage", "Usage")
    main = clean.page.locator("main")
    expect(main).to_contain_text(f"of {usage['quota']['daily']:,} new messages today")
    expect(main).to_contain_text(f"{usage['rateLimit']['perSecond']:,} requests a second")
    expect(main).to_contain_text("requests left")  # from the answer's RateLimit fields


# ---------------------------------------------------------------------------- every view
def test_the_policy_is_sent_and_every_view_works_under_it_wide_and_narrow(
    stack: LocalStack, clean: Console
) -> None:
    page_answer = requests.get(f"{stack.api}/console", timeout=10)
    policy = page_answer.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy
    assert "script-src 'self'" in policy
    assert "unsafe" not in policy
    assert page_answer.headers["X-Content-Type-Options"] == "nosniff"

    message_id = created_id(send(stack, sms(unique_phone(), unique_body("console screenshot"))))
    shots = {address: (address, heading) for address, heading in VIEWS.items()}
    shots["timeline"] = (f"messages/{message_id}", "Message timeline")
    for suffix, size in (("", WIDE), ("-360", NARROW)):
        clean.page.set_viewport_size(size)
        for name, (address, heading) in shots.items():
            clean.go(address, heading)
            clean.screenshot(f"{name}{suffix}")
            overflow = clean.page.evaluate("() => document.documentElement.scrollWidth - innerWidth")
            assert overflow <= 0, f"{name} is wider than {size['width']} px"
    clean.page.set_viewport_size(WIDE)

    # The policy is in force: markup written as a string is refused (Trusted Types), and an image
    # from elsewhere is a violation the tab reports.
    refused = clean.page.evaluate(
        "() => { try { document.createElement('div').innerHTML = '<b>x</b>'; return 'written'; }"
        " catch (error) { return error.name; } }"
    )
    assert refused == "TypeError"
    clean.page.evaluate(
        "() => { const img = document.createElement('img'); img.src = 'http://example.invalid/x.png';"
        " document.body.append(img); img.remove(); }"
    )
    found = eventually(clean.violations, timeout=5)
    assert any(v.startswith("img-src") for v in found), found
    # What these two controls made the browser report is theirs, not the console's.
    clean.page.evaluate("() => { window.__violations = []; }")
    controls = ("TrustedHTML", "example.invalid")
    clean.watched.console_errors[:] = [
        error for error in clean.watched.console_errors if not any(c in error for c in controls)
    ]


def test_a_test_keys_console_says_test_mode_on_every_view(stack: LocalStack, browser: Browser) -> None:
    created_id(send(stack, sms(unique_phone(), unique_body("console test mode")), key=stack.test_api_key))
    tab = Console.open_tab(browser, stack.api)
    try:
        tab.page.goto(f"{stack.api}/console")
        tab.page.get_by_label("API key").fill("sk_test_not_a_key")
        tab.page.get_by_role("button", name="Sign in").click()
        expect(tab.page.get_by_role("alert")).to_contain_text("unauthorized")
        expect(tab.page.locator("#test-mode")).to_be_hidden()

        tab.page.get_by_label("API key").fill(stack.test_api_key)
        tab.page.get_by_role("button", name="Sign in").click()
        tab.wait_for("Messages")
        for address, heading in VIEWS.items():
            tab.go(address, heading)
            expect(tab.page.locator("#test-mode")).to_be_visible()
            expect(tab.page.locator("#test-mode")).to_contain_text("Test mode")
            assert "(test mode)" in tab.page.title()
        tab.go("messages", "Messages")
        tab.screenshot("test-mode")
        assert tab.page.evaluate("() => Object.keys(localStorage).length") == 0  # the tab's session only
        assert tab.page.context.cookies() == []

        tab.sign_out()
        expect(tab.page.locator("#test-mode")).to_be_hidden()
        assert tab.page.evaluate("() => sessionStorage.length") == 0
        assert tab.watched.dialogs == []
        assert tab.watched.page_errors == []
        assert tab.violations() == []
    finally:
        tab.close()


def test_the_console_is_usable_with_the_keyboard(clean: Console) -> None:
    page = clean.page
    clean.go("messages", "Messages")
    page.reload()  # the tab stays signed in: its session keeps the key
    clean.wait_for("Messages")

    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "skip"
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"

    page.locator("nav a", has_text="Suppressions").focus()
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # the focus is visible
    page.keyboard.press("Enter")
    clean.wait_for("Suppressions")
    # The view's heading takes the focus after a change of view.
    assert page.evaluate("() => document.activeElement.tagName") == "H1"
    for label in ("Channel", "Recipient"):
        expect(page.get_by_label(label, exact=True)).to_be_visible()


def test_no_view_has_a_serious_or_critical_accessibility_violation(
    stack: LocalStack, browser: Browser
) -> None:
    source = axe_source()
    # axe-core is injected as a script of its own: only this tab lets the browser skip the policy.
    tab = Console.open_tab(browser, stack.api, bypass_csp=True)
    try:
        tab.page.goto(f"{stack.api}/console")
        expect(tab.heading()).to_have_text("Sign in")
        found = {"sign-in": tab.axe_violations(source)}
        tab.sign_in(stack.api_key)
        message_id = created_id(send(stack, sms(unique_phone(), unique_body("console axe"))))
        addresses = {**VIEWS, f"messages/{message_id}": "Message timeline"}
        for size in (WIDE, NARROW):
            tab.page.set_viewport_size(size)
            for address, heading in addresses.items():
                tab.go(address, heading)
                found[f"{address} at {size['width']} px"] = tab.axe_violations(source)
        assert {view: problems for view, problems in found.items() if problems} == {}

        # The check sees what it looks for: an input without a label is critical.
        tab.page.evaluate("() => document.querySelector('main').append(document.createElement('input'))")
        assert "label" in {problem["id"] for problem in tab.axe_violations(source)}
    finally:
        tab.close()
