"""Templates through the local stack: create, version, read, render (bounded), delete."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

import pytest

from tests.e2e.e2e_support import call

if TYPE_CHECKING:
    from tests.e2e.conftest import LocalStack

pytestmark = pytest.mark.e2e


def test_a_template_is_versioned_rendered_and_deleted(stack: LocalStack) -> None:
    name = f"welcome-{uuid.uuid4().hex[:8]}"
    created = call(stack, "POST", "/v1/templates", {"name": name, "channel": "sms", "body": "Hi {{ name }}"})
    assert created.status_code == 201, created.text
    assert created.json()["template"]["version"] == 1
    assert (
        call(stack, "POST", "/v1/templates", {"name": name, "channel": "sms", "body": "x"}).status_code == 409
    )

    second = call(stack, "POST", f"/v1/templates/{name}/versions", {"body": "Hi {{ name }} \u2713"})
    assert second.status_code == 201
    assert second.json()["template"]["version"] == 2
    assert (
        call(stack, "GET", f"/v1/templates/{name}/versions/1").json()["template"]["body"] == "Hi {{ name }}"
    )

    rendered = call(stack, "POST", f"/v1/templates/{name}/render", {"data": {"name": "Ann"}})
    assert rendered.status_code == 200, rendered.text
    assert rendered.json()["rendered"]["body"] == "Hi Ann \u2713"
    assert rendered.json()["sms"] == {"encoding": "UCS-2", "segments": 1, "nonGsmCharacters": ["\u2713"]}
    missing = call(stack, "POST", f"/v1/templates/{name}/render", {"data": {}})
    assert missing.status_code == 422
    assert missing.json()["error"]["details"] == {"missing": ["name"]}

    assert call(stack, "DELETE", f"/v1/templates/{name}").status_code == 200
    assert call(stack, "GET", f"/v1/templates/{name}").status_code == 404


def test_a_render_that_never_ends_is_stopped_and_the_api_goes_on(stack: LocalStack) -> None:
    name = f"loop-{uuid.uuid4().hex[:8]}"
    body = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}"
    assert (
        call(stack, "POST", "/v1/templates", {"name": name, "channel": "sms", "body": body}).status_code
        == 201
    )

    started = time.monotonic()
    stopped = call(stack, "POST", f"/v1/templates/{name}/render", {"data": {}})

    assert stopped.status_code == 422
    assert stopped.json()["error"]["details"] == {"limit": "time"}
    assert time.monotonic() - started < 10  # stopped at 1 s, with room for a loaded machine
    assert call(stack, "GET", f"/v1/templates/{name}").status_code == 200
