"""The console's router and files, without a browser (tests/e2e/test_e2e_console.py drives one).

The page and each file it runs are served with the console's Content-Security-Policy and the
headers that keep a browser from guessing, framing or leaking; only the files of the router's
table are served, and any other name, a path's traversal included, is the API's one 404. The files
themselves hold no inline script, handler or style (which the policy would refuse anyway), write no
markup from strings, and keep the key in `sessionStorage` alone.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from sendonce import channels
from sendonce.api.app import handle
from sendonce.api.routers.console import ASSETS, CONTENT_SECURITY_POLICY
from sendonce.messages.model import Status

from tests.support.lambda_context import FakeLambdaContext

CONSOLE = Path(str(files("sendonce.api").joinpath("console")))
SCRIPTS = sorted(name for name in ASSETS if name.endswith(".js"))


def get(path: str) -> dict[str, Any]:
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {},
        "requestContext": {"http": {"method": "GET", "path": path}, "stage": "$default"},
        "isBase64Encoded": False,
    }
    answer: dict[str, Any] = handle(event, FakeLambdaContext())  # type: ignore[arg-type]
    return answer


def directives(policy: str) -> dict[str, str]:
    parsed = {}
    for directive in policy.split(";"):
        name, _, value = directive.strip().partition(" ")
        parsed[name] = value
    return parsed


def assert_guarded(headers: dict[str, str]) -> None:
    policy = directives(headers["Content-Security-Policy"])
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"  # no 'unsafe-inline', no 'unsafe-eval', no other origin
    assert policy["style-src"] == "'self'"
    assert policy["connect-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["base-uri"] == "'none'"
    assert policy["form-action"] == "'none'"
    assert policy["require-trusted-types-for"] == "'script'"
    assert "unsafe" not in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["X-Frame-Options"] == "DENY"


# ---------------------------------------------------------------------------- the router
def test_the_page_is_the_console_with_its_policy_and_never_cached() -> None:
    answer = get("/console")

    assert answer["statusCode"] == 200
    headers = answer["headers"]
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Cache-Control"] == "no-store"
    assert_guarded(headers)
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert answer["body"] == (CONSOLE / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(ASSETS))
def test_each_file_of_the_table_is_served_as_what_it_is(name: str) -> None:
    answer = get(f"/console/{name}")

    assert answer["statusCode"] == 200
    headers = answer["headers"]
    expected = "text/css" if name.endswith(".css") else "text/javascript"
    assert headers["Content-Type"] == f"{expected}; charset=utf-8"
    assert headers["Cache-Control"] == "public, max-age=300"
    assert_guarded(headers)
    assert answer["body"] == (CONSOLE / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "path",
    [
        "/console/nope.js",
        "/console/index.html",  # the page is /console itself
        "/console/CONSOLE.JS",
        "/console/console.js.map",
        "/console/..%2Frouters%2Fconsole.py",
        "/console/%2E%2E%2F%2E%2E%2Fapp.py",
        "/console/..%5Capp.py",
        "/console/%252e%252e%252fapp.py",
        "/console/console.js%00.css",
        "/console/.",
    ],
)
def test_any_other_name_is_the_apis_one_404(path: str) -> None:
    answer = get(path)

    assert answer["statusCode"] == 404
    assert answer["headers"]["Content-Type"].startswith("application/json")
    body = json.loads(answer["body"])
    assert body["success"] is False
    assert body["error"]["code"] == "not_found"


def test_the_table_and_the_packaged_files_agree() -> None:
    on_disk = {path.name for path in CONSOLE.iterdir() if path.is_file()}

    assert on_disk == {*ASSETS, "index.html"}


# ---------------------------------------------------------------------------- the files
class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text.append(data)


def _page() -> _Page:
    page = _Page()
    page.feed((CONSOLE / "index.html").read_text(encoding="utf-8"))
    return page


def test_the_page_has_no_inline_script_handler_or_style() -> None:
    page = _page()
    scripts = [attrs for tag, attrs in page.elements if tag == "script"]

    assert scripts == [{"type": "module", "src": "console/console.js"}]
    assert "".join(page.script_text).strip() == ""
    assert not [tag for tag, _ in page.elements if tag == "style"]
    for tag, attrs in page.elements:
        inline = [name for name in attrs if name.startswith("on") or name == "style"]
        assert inline == [], f"<{tag}> has {inline}"


def test_the_page_loads_only_the_consoles_own_files() -> None:
    page = _page()
    loaded = [
        attrs.get("src") or attrs.get("href")
        for tag, attrs in page.elements
        if tag in ("script", "link") and attrs.get("rel") != "icon"
    ]

    assert loaded == ["console/console.css", "console/console.js"]
    for name in loaded:
        assert name is not None
        assert name.removeprefix("console/") in ASSETS


def test_the_page_has_its_landmarks_a_skip_link_and_the_test_mode_banner() -> None:
    page = _page()
    tags = [tag for tag, _ in page.elements]
    ids = {attrs.get("id") for _, attrs in page.elements}

    assert {"header", "nav", "main"} <= set(tags)
    assert {"skip", "main", "test-mode"} <= ids
    assert ("html", {"lang": "en"}) in page.elements
    assert "Test mode" in (CONSOLE / "index.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_writes_no_markup_from_strings_and_keeps_the_key_in_the_session(name: str) -> None:
    text = (CONSOLE / name).read_text(encoding="utf-8")
    code = re.sub(r"//[^\n]*", "", text)  # what the comments say of these is not code

    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function("):
        assert sink not in code, f"{name} uses {sink}"
    assert "localStorage" not in code
    assert "document.cookie" not in code


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_imports_only_files_of_the_table(name: str) -> None:
    text = (CONSOLE / name).read_text(encoding="utf-8")
    imported = re.findall(r"""from\s+["']([^"']+)["']""", text)

    for target in imported:
        assert target.startswith("./"), f"{name} imports {target}"
        assert target.removeprefix("./") in ASSETS


def test_the_style_sheet_loads_nothing_from_elsewhere() -> None:
    css = (CONSOLE / "console.css").read_text(encoding="utf-8")

    assert "@import" not in css
    assert "url(" not in css


def _listed(script: str, name: str) -> list[str]:
    found = re.search(rf"export const {name} = \[(.*?)\];", (CONSOLE / script).read_text("utf-8"), re.DOTALL)
    assert found, f"{script} declares no {name}"
    return re.findall(r'"([^"]+)"', found.group(1))


def test_the_consoles_statuses_and_channels_are_the_services() -> None:
    """The filters offer exactly what the API takes: the statuses a message has, the channels registered."""
    assert _listed("messages.js", "STATUSES") == [status.value for status in Status]
    assert _listed("messages.js", "CHANNELS") == list(channels.names())
