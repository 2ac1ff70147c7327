"""docs/api.md is derived from the API's OpenAPI document, never kept by hand.

The first test fails as soon as a route, a schema or an answer changes without the reference
being regenerated; the others pin what the generator renders from a small document.
"""

from __future__ import annotations

import difflib
from typing import Any

import pytest

from sendonce_local import api_reference


def test_docs_api_md_is_what_the_openapi_document_renders_now() -> None:
    expected = api_reference.render(api_reference.current_document())
    actual = api_reference.DOCS_PATH.read_text(encoding="utf-8") if api_reference.DOCS_PATH.exists() else ""
    if actual != expected:
        diff = difflib.unified_diff(
            actual.splitlines(), expected.splitlines(), "docs/api.md", "rendered now", lineterm="", n=1
        )
        excerpt = "\n".join(list(diff)[:40])
        pytest.fail(
            "docs/api.md differs from the OpenAPI document. "
            f"Regenerate it with one command: {api_reference.REGENERATE}\n{excerpt}"
        )


def _document() -> dict[str, Any]:
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "demo", "version": "1", "description": "Sends things."},
        "security": [{"bearerAuth": []}],
        "paths": {
            "/v1/health": {
                "get": {"summary": "Health", "security": [], "responses": {"200": {"description": "ok"}}}
            },
            "/v1/things": {
                "post": {
                    "summary": "Make a thing",
                    "description": "Key: `Authorization: Bearer <key>`, not <key>.",
                    "parameters": [
                        {
                            "name": "idempotency-key",
                            "in": "header",
                            "required": False,
                            "schema": {"type": "string", "maxLength": 255, "minLength": 1},
                            "description": "a | key",
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}},
                    },
                    "responses": {
                        "422": {**error, "description": "thing_reused"},
                        "201": {
                            "description": "Made",
                            "headers": {"Idempotency-Replayed": {"description": "true on a replay"}},
                        },
                        "409": {
                            **error,
                            "description": "in_progress",
                            "headers": {"Retry-After": {"description": "seconds"}},
                        },
                    },
                }
            },
        },
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "ErrorBody": {"properties": {"success": {"const": False}}, "required": ["success"]},
                "Thing": {
                    "properties": {
                        "channel": {"type": "string", "enum": ["a", "b"]},
                        "limit": {"type": "integer", "minimum": 1.0, "maximum": 100.0, "default": 20},
                        "note": {"anyOf": [{"type": "string", "maxLength": 9}, {"type": "null"}]},
                    },
                    "required": ["channel"],
                    "additionalProperties": False,
                },
                "Unused": {"properties": {"x": {"type": "string"}}},
            },
        },
    }


def test_each_operation_is_rendered_with_its_auth_parameters_body_and_answers_in_order() -> None:
    text = api_reference.render(_document())

    assert "| GET | `/v1/health` | public | Health | 200 |" in text
    assert "| POST | `/v1/things` | bearer | Make a thing | 201, 409, 422 |" in text
    assert "### POST /v1/things" in text
    assert "| `Idempotency-Key` | header | no | string | 1 to 255 characters | a \\| key |" in text
    assert "Request body (`application/json`, required): [`Thing`](#thing)" in text
    section = text[text.index("### POST /v1/things") :]
    assert section.index("| 201 | Made |") < section.index("| 409 | in_progress |") < section.index("| 422 |")


def test_schemas_used_by_an_operation_are_rendered_with_their_rules_and_unused_ones_are_not() -> None:
    text = api_reference.render(_document())

    assert '| `channel` | one of `"a"`, `"b"` | yes |  |  |' in text
    assert "| `limit` | integer | no | 1 to 100; default `20` |  |" in text
    assert "| `note` | string or null | no | at most 9 characters |  |" in text
    assert "Any other field is rejected." in text
    assert "### Unused" not in text


def test_error_answers_and_headers_are_gathered_across_routes() -> None:
    text = api_reference.render(_document())

    assert "| 409 | in_progress | POST `/v1/things` |" in text
    assert "| 422 | thing_reused | POST `/v1/things` |" in text
    assert "| `Retry-After` | POST `/v1/things` 409 | seconds |" in text
    assert "| `Idempotency-Replayed` | POST `/v1/things` 201 | true on a replay |" in text
    # Angle brackets outside code spans are escaped; inside them they are left as written.
    assert "Key: `Authorization: Bearer <key>`, not &lt;key>." in text
