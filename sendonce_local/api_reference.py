"""docs/api.md, rendered from the API's own OpenAPI document, so the reference is never kept by hand.

`render` turns the document (what `GET /openapi.json` serves) into Markdown; `main` writes it to
docs/api.md. tests/unit/test_api_reference.py fails whenever the file differs from what the
document renders now, so a change to a route, a schema or an answer is one command away from its
reference: `python -m sendonce_local.api_reference`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DOCS_PATH = Path(__file__).resolve().parent.parent / "docs" / "api.md"
REGENERATE = ".venv/bin/python -m sendonce_local.api_reference"

_METHODS = ("get", "post", "put", "patch", "delete")
_ERROR_SCHEMA = "ErrorBody"
# Not in the document: the template's `$default` route sends every other request to the API function.
_ANY_PATH = (
    "A path that no route declares answers `404 not_found`; a declared path asked with another "
    "method answers `405 method_not_allowed`, with an `Allow` header listing the methods it takes. "
    "No request, however malformed, gets a `500`."
)

Schema = dict[str, Any]


def current_document() -> dict[str, Any]:
    """The OpenAPI document the API serves at `GET /openapi.json` (built without any AWS call)."""
    from sendonce.api.openapi import openapi_document  # noqa: PLC0415

    document: dict[str, Any] = json.loads(openapi_document())
    return document


def render(document: dict[str, Any]) -> str:
    """The Markdown reference of every operation, header, error answer and schema of the document."""
    operations = list(_operations(document))
    info = document.get("info", {})
    lines = [
        f"# {info.get('title', 'API')} HTTP API reference",
        "",
        "<!-- Generated from the OpenAPI document by `python -m sendonce_local.api_reference`. "
        "Do not edit: change the routes or schemas, then regenerate. -->",
        "",
    ]
    if info.get("description"):
        lines += [_prose(info["description"]), ""]
    lines += [
        f"OpenAPI {document.get('openapi', '3')}, API version {info.get('version', '?')}. A running stack "
        "serves the same document at `GET /openapi.json` and a browsable page of it at `GET /docs`.",
        "",
        "The bodies of the `/v1/` routes are JSON (`application/json; charset=utf-8`), and every answer "
        'of theirs is an object with `"success": true` or `false`.',
        "",
    ]
    lines += _authentication(document)
    lines += _route_index(document, operations)
    lines += _headers(operations)
    lines += _errors(document, operations)
    lines += ["## Operations", ""]
    for path, method, operation in operations:
        lines += _operation(document, path, method, operation)
    lines += _schemas(document, operations)
    return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------- sections
def _authentication(document: dict[str, Any]) -> list[str]:
    schemes = document.get("components", {}).get("securitySchemes", {})
    lines = ["## Authentication", ""]
    for name, scheme in schemes.items():
        kind = f"HTTP {scheme.get('scheme')}" if scheme.get("type") == "http" else scheme.get("type", "")
        lines.append(f"- `{name}` ({kind}): {_prose(scheme.get('description', ''))}".rstrip(": "))
    lines += [
        "",
        "Routes marked *bearer* need the API key; routes marked *public* take none. Everything a key "
        "reaches (messages, Idempotency-Keys, dedup locks) belongs to the key's workspace.",
        "",
    ]
    return lines


def _route_index(document: dict[str, Any], operations: list[tuple[str, str, Schema]]) -> list[str]:
    lines = [
        "## Routes",
        "",
        "| method | path | auth | summary | answers |",
        "| --- | --- | --- | --- | --- |",
    ]
    for path, method, operation in operations:
        statuses = ", ".join(_sorted_statuses(operation.get("responses", {})))
        lines.append(
            f"| {method.upper()} | `{path}` | {_auth(document, operation)} | "
            f"{_cell(operation.get('summary', ''))} | {statuses} |"
        )
    return [*lines, ""]


def _headers(operations: list[tuple[str, str, Schema]]) -> list[str]:
    requests: dict[str, tuple[str, list[str]]] = {}
    answers: dict[str, tuple[str, list[str]]] = {}
    for path, method, operation in operations:
        route = f"{method.upper()} `{path}`"
        for parameter in operation.get("parameters", []):
            if parameter.get("in") == "header":
                _collect(requests, _header_name(parameter["name"]), _description(parameter), route)
        for status, response in _sorted_responses(operation.get("responses", {})):
            for name, header in response.get("headers", {}).items():
                _collect(answers, name, _description(header), f"{route} {status}")
    lines = ["## Headers", ""]
    if requests:
        lines += ["Request headers:", "", "| header | routes | description |", "| --- | --- | --- |"]
        lines += [
            f"| `{name}` | {', '.join(routes)} | {_cell(description)} |"
            for name, (description, routes) in requests.items()
        ]
        lines.append("")
    if answers:
        lines += ["Response headers:", "", "| header | answers | description |", "| --- | --- | --- |"]
        lines += [
            f"| `{name}` | {', '.join(routes)} | {_cell(description)} |"
            for name, (description, routes) in answers.items()
        ]
        lines.append("")
    return lines if len(lines) > 2 else []


def _errors(document: dict[str, Any], operations: list[tuple[str, str, Schema]]) -> list[str]:
    """Every error answer the routes declare: one row per status and meaning, with its routes."""
    rows: dict[tuple[int, str], list[str]] = {}
    for path, method, operation in operations:
        for status, response in _sorted_responses(operation.get("responses", {})):
            if status.isdigit() and _ERROR_SCHEMA in _body_names(response):
                key = (int(status), response.get("description", ""))
                rows.setdefault(key, []).append(f"{method.upper()} `{path}`")
    if not rows:
        return []
    lines = [
        "## Errors",
        "",
        f"Every error answer has the body {_link(_ERROR_SCHEMA)}: "
        '`{"success": false, "error": {"code": str, "message": str, "details": …}}`, where `details` '
        "(when present) names each field that is wrong.",
        "",
        _ANY_PATH,
        "",
        "| status | meaning | routes |",
        "| --- | --- | --- |",
    ]
    for (code, description), routes in sorted(rows.items()):
        lines.append(f"| {code} | {_cell(description)} | {', '.join(routes)} |")
    return [*lines, ""]


def _operation(document: dict[str, Any], path: str, method: str, operation: Schema) -> list[str]:
    lines = [f"### {method.upper()} {path}", ""]
    summary = operation.get("summary", "")
    tags = ", ".join(operation.get("tags", []))
    lines += [
        f"**{summary}**" + (f" ({tags})" if tags else "") + f". Auth: {_auth(document, operation)}.",
        "",
    ]
    if operation.get("description"):
        lines += [_prose(operation["description"]), ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += [
            "Parameters:",
            "",
            "| name | in | required | type | rules | description |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            name = _header_name(parameter["name"]) if parameter.get("in") == "header" else parameter["name"]
            lines.append(
                f"| `{name}` | {parameter.get('in', '')} | {_yes(parameter.get('required', False))} | "
                f"{_type(schema)} | {_cell('; '.join(_rules(schema)))} | {_cell(_description(parameter))} |"
            )
        lines.append("")
    body = operation.get("requestBody")
    if body:
        for media_type, content in body.get("content", {}).items():
            required = "required" if body.get("required") else "optional"
            lines += [f"Request body (`{media_type}`, {required}): {_type(content.get('schema', {}))}", ""]
    responses = _sorted_responses(operation.get("responses", {}))
    with_headers = any(response.get("headers") for _, response in responses)
    lines += ["Responses:", "", "| status | description | body |" + (" headers |" if with_headers else "")]
    lines.append("| --- | --- | --- |" + (" --- |" if with_headers else ""))
    for status, response in responses:
        bodies = [
            _type(content["schema"]) if content.get("schema") else f"`{media_type}`"
            for media_type, content in response.get("content", {}).items()
        ]
        row = f"| {status} | {_cell(response.get('description', ''))} | {', '.join(bodies)} |"
        if with_headers:
            row += " " + ", ".join(f"`{name}`" for name in response.get("headers", {})) + " |"
        lines.append(row)
    return [*lines, ""]


def _schemas(document: dict[str, Any], operations: list[tuple[str, str, Schema]]) -> list[str]:
    schemas = document.get("components", {}).get("schemas", {})
    names = sorted(_reachable(schemas, [operation for _, _, operation in operations]))
    if not names:
        return []
    lines = ["## Schemas", ""]
    for name in names:
        schema = schemas[name]
        lines += [f"### {name}", ""]
        if schema.get("description"):
            lines += [_prose(schema["description"]), ""]
        properties = schema.get("properties")
        if properties is None:
            lines += [_sentence([_type(schema), *_rules(schema)]), ""]
            continue
        required = set(schema.get("required", []))
        lines += [
            "| field | type | required | rules | description |",
            "| --- | --- | --- | --- | --- |",
        ]
        for field, field_schema in properties.items():
            lines.append(
                f"| `{field}` | {_type(field_schema)} | {_yes(field in required)} | "
                f"{_cell('; '.join(_rules(field_schema)))} | {_cell(_description(field_schema))} |"
            )
        lines.append("")
        if schema.get("additionalProperties") is False:
            lines += ["Any other field is rejected.", ""]
    return lines


# ---------------------------------------------------------------------------- the document
def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, Schema]]:
    """Every operation, the versioned API first, then by path and method: an order the code cannot shuffle."""
    paths = document.get("paths", {})
    for path in sorted(paths, key=lambda path: (not path.startswith("/v1/"), path)):
        for method in _METHODS:
            if method in paths[path]:
                yield path, method, paths[path][method]


def _auth(document: dict[str, Any], operation: Schema) -> str:
    requirements = operation.get("security", document.get("security", []))
    if not requirements:
        return "public"
    schemes = document.get("components", {}).get("securitySchemes", {})
    names = []
    for requirement in requirements:
        for name in requirement:
            scheme = schemes.get(name, {})
            names.append(scheme.get("scheme", name) if scheme.get("type") == "http" else name)
    return " or ".join(dict.fromkeys(names))


def _sorted_statuses(responses: dict[str, Any]) -> list[str]:
    return sorted(responses, key=lambda status: (not status.isdigit(), status))


def _sorted_responses(responses: dict[str, Any]) -> list[tuple[str, Schema]]:
    return [(status, responses[status]) for status in _sorted_statuses(responses)]


def _body_names(response: Schema) -> set[str]:
    return {
        content["schema"]["$ref"].rsplit("/", 1)[-1]
        for content in response.get("content", {}).values()
        if "$ref" in content.get("schema", {})
    }


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"].rsplit("/", 1)[-1]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _reachable(schemas: dict[str, Any], roots: list[Schema]) -> set[str]:
    """The schemas an operation uses, directly or through another schema (internal ones left out)."""
    seen: set[str] = set()
    pending = [name for root in roots for name in _refs(root)]
    while pending:
        name = pending.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        pending.extend(_refs(schemas[name]))
    return seen


# ---------------------------------------------------------------------------- schema text
def _type(schema: Schema) -> str:
    if "$ref" in schema:
        return _link(schema["$ref"].rsplit("/", 1)[-1])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    variants = schema.get("anyOf") or schema.get("oneOf")
    if variants:
        return " or ".join(_type(variant) for variant in variants)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(str(each) for each in kind)
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of string to {_type(schema['additionalProperties'])}"
    if kind == "string" and schema.get("format"):
        return f"string ({schema['format']})"
    return str(kind or "any")


def _rules(schema: Schema) -> list[str]:
    """The constraints of a schema, and of the non-null alternatives of a nullable one."""
    rules: list[str] = []
    for variant in schema.get("anyOf") or schema.get("oneOf") or []:
        rules += _rules(variant)
    rules += _bounds(schema.get("minLength"), schema.get("maxLength"), "characters")
    rules += _bounds(schema.get("minItems"), schema.get("maxItems"), "items")
    rules += _bounds(schema.get("minProperties"), schema.get("maxProperties"), "keys")
    if "minimum" in schema or "maximum" in schema:
        rules.append(_range(schema.get("minimum"), schema.get("maximum")))
    if "pattern" in schema:
        rules.append(f"matches `{schema['pattern']}`")
    names = _rules(schema["propertyNames"]) if "propertyNames" in schema else []
    if names:
        rules.append("keys: " + ", ".join(names))
    values = schema.get("additionalProperties")
    if isinstance(values, dict) and _rules(values):
        rules.append("values: " + ", ".join(_rules(values)))
    if "default" in schema and schema["default"] is not None:
        rules.append(f"default `{json.dumps(schema['default'])}`")
    return rules


def _bounds(low: Any, high: Any, unit: str) -> list[str]:
    if low is not None and high is not None:
        return [f"{_number(low)} to {_number(high)} {unit}"]
    if high is not None:
        return [f"at most {_number(high)} {unit}"]
    if low is not None and low > 0:
        return [f"at least {_number(low)} {unit}"]
    return []


def _range(low: Any, high: Any) -> str:
    if low is not None and high is not None:
        return f"{_number(low)} to {_number(high)}"
    return f"at least {_number(low)}" if low is not None else f"at most {_number(high)}"


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _description(node: Schema) -> str:
    return str(node.get("description") or node.get("schema", {}).get("description") or "")


def _collect(into: dict[str, tuple[str, list[str]]], name: str, description: str, where: str) -> None:
    known, places = into.get(name, (description, []))
    into[name] = (known or description, [*places, where])


def _header_name(name: str) -> str:
    """HTTP header names as people write them: `idempotency-key` is shown `Idempotency-Key`."""
    return "-".join(part[:1].upper() + part[1:] for part in name.split("-"))


def _link(name: str) -> str:
    return f"[`{name}`](#{name.lower()})"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _sentence(parts: list[str]) -> str:
    text = "; ".join(parts)
    return f"{text[:1].upper()}{text[1:]}."


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    return _prose(" ".join(text.split())).replace("|", "\\|")


def _prose(text: str) -> str:
    """Text outside code spans with `<` escaped, so `<key>` shows instead of vanishing as a tag."""
    parts = text.split("`")
    return "`".join(part.replace("<", "&lt;") if index % 2 == 0 else part for index, part in enumerate(parts))


def main() -> int:
    """Write docs/api.md from the document the API serves now."""
    text = render(current_document())
    DOCS_PATH.parent.mkdir(parents=True, exist_ok=True)
    DOCS_PATH.write_text(text, encoding="utf-8")
    sys.stdout.write(
        f"wrote {DOCS_PATH.relative_to(DOCS_PATH.parent.parent)} ({len(text.splitlines())} lines)\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
