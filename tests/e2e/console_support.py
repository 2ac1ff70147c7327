"""What the console's browser tests share: Debian's Chromium driven by Playwright, a tab that
watches for what must never happen (a dialog, a script error, an error in the console, a
Content-Security-Policy violation), axe-core injected for the accessibility check, and the
screenshots each view leaves in tests/e2e/artifacts/console/.

The browser is Debian's (`/usr/bin/chromium`, which `make install` installs): Playwright's pip
package brings its driver, never a browser of its own. Without Chromium or axe-core, outside CI,
the tests that need them are skipped and say why; in CI (`CI=true`) they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Dialog,
    Locator,
    Page,
    ViewportSize,
    expect,
)

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
AXE = REPO / "tests" / "e2e" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
ARTIFACTS = REPO / "tests" / "e2e" / "artifacts" / "console"
# The README's picture of the console: copied from a run's screenshot when this is set to 1.
README_IMAGE = REPO / "docs" / "images" / "console-messages.png"
README_IMAGE_VARIABLE = "SENDONCE_CONSOLE_README_IMAGE"
WIDE: ViewportSize = {"width": 1280, "height": 860}
NARROW: ViewportSize = {"width": 360, "height": 780}  # the narrowest phone the console is made for
WAIT_MS = 15_000
# Every assertion waits as long as an action does: beside the other lane of `make test`, the local
# stack answers a view's requests (50 events and their deliveries) in seconds, not milliseconds.
expect.set_options(timeout=WAIT_MS)
# Each view's heading, by its address.
VIEWS = {
    "messages": "Messages",
    "promise": "The promise",
    "webhooks": "Status webhooks",
    "suppressions": "Suppressions",
    "templates": "Templates",
    "campaigns": "Campaigns",
    "usage": "Usage",
}
# Records each Content-Security-Policy violation the page sees, for the test to read.
WATCH_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI}`);
});
"""


def unavailable(reason: str) -> NoReturn:
    """What a missing browser or engine means: a failure in CI, a skip that says why elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI must run the console's browser tests)")
    pytest.skip(reason)


def require_chromium() -> None:
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is missing: `make install` installs Debian's chromium package")


def axe_source() -> str:
    if not AXE.exists():
        unavailable(f"{AXE.relative_to(REPO)} is missing: `make install` installs axe-core with npm")
    return AXE.read_text(encoding="utf-8")


@dataclass
class Watched:
    """What the tab reported that the console must never cause."""

    dialogs: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)

    def clear(self) -> None:
        self.dialogs.clear()
        self.page_errors.clear()
        self.console_errors.clear()


@dataclass
class Console:
    """One browser tab on the console of a local stack."""

    page: Page
    api: str
    watched: Watched

    @classmethod
    def open_tab(cls, browser: Browser, api: str, *, bypass_csp: bool = False) -> Console:
        context: BrowserContext = browser.new_context(viewport=WIDE, bypass_csp=bypass_csp)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        watched = Watched()

        def on_dialog(dialog: Dialog) -> None:
            watched.dialogs.append(f"{dialog.type}: {dialog.message}")
            dialog.dismiss()

        def on_console(message: ConsoleMessage) -> None:
            if message.type == "error":
                watched.console_errors.append(message.text)

        page.on("dialog", on_dialog)
        page.on("pageerror", lambda error: watched.page_errors.append(str(error)))
        page.on("console", on_console)
        page.add_init_script(WATCH_VIOLATIONS)
        return cls(page, api, watched)

    def close(self) -> None:
        self.page.context.close()

    # ------------------------------------------------------------------ what a user does
    def sign_in(self, key: str) -> None:
        self.page.goto(f"{self.api}/console")
        self.page.get_by_label("API key").fill(key)
        self.page.get_by_role("button", name="Sign in").click()
        self.wait_for("Messages")

    def sign_out(self) -> None:
        self.page.get_by_role("button", name="Sign out").click()
        expect(self.heading()).to_have_text("Sign in")

    def go(self, address: str, heading: str) -> None:
        """A view by its address (`messages`, `messages/msg_…`, `promise?days=7`), shown and loaded."""
        self.page.evaluate("(hash) => { location.hash = hash; }", f"#/{address}")
        self.wait_for(heading)

    def heading(self) -> Locator:
        return self.page.locator("main h1")

    def wait_for(self, heading: str) -> None:
        """The view of that heading is shown, and no answer of the API is awaited any more."""
        expect(self.heading()).to_have_text(heading)
        expect(self.page.locator("main")).not_to_have_attribute("aria-busy", "true")

    def refresh(self, heading: str) -> None:
        self.page.locator("main").get_by_role("button", name="Refresh").click()
        self.wait_for(heading)

    def refresh_until(self, heading: str, check: Callable[[], bool], timeout: float = 45.0) -> None:
        """Refresh the view until `check` holds (counts and events may trail by a few seconds)."""
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"not shown within {timeout}s")
            time.sleep(0.5)
            self.refresh(heading)

    # ------------------------------------------------------------------ what it must never do
    def violations(self) -> list[str]:
        found: list[str] = self.page.evaluate("() => window.__violations ?? []")
        return found

    def assert_clean(self) -> None:
        """No dialog, no script error, no error in the console, no CSP violation."""
        assert self.watched.dialogs == [], self.watched.dialogs
        assert self.watched.page_errors == [], self.watched.page_errors
        assert self.watched.console_errors == [], self.watched.console_errors
        assert self.violations() == []

    # ------------------------------------------------------------------ artifacts
    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        if name == "messages" and os.environ.get(README_IMAGE_VARIABLE) == "1":
            README_IMAGE.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, README_IMAGE)
        return path

    def axe_violations(self, source: str) -> list[dict[str, Any]]:
        """axe-core's serious and critical violations of the view shown (a tab with bypass_csp)."""
        if not self.page.evaluate("() => typeof window.axe === 'object'"):
            self.page.add_script_tag(content=source)
        results: dict[str, Any] = self.page.evaluate(
            "async () => await axe.run(document, {resultTypes: ['violations']})"
        )
        return [
            {
                "id": violation["id"],
                "impact": violation["impact"],
                "help": violation["help"],
                "nodes": [node["target"] for node in violation["nodes"]][:5],
            }
            for violation in results["violations"]
            if violation["impact"] in ("serious", "critical")
        ]


def count_in(row: Locator, name: str) -> int:
    """The number a table cell of that field shows (`1,234` reads 1234)."""
    text = row.locator(f'td[data-field="{name}"]').inner_text()
    return int(re.sub(r"[^0-9]", "", text) or "0")
