"""Request bodies as JSON: the one decoding function, which only the preflight calls.

Whatever a route reads of a JSON body, it reads the value this function made of it: no handler, nor
the router's validation, nor the Idempotency-Key's payload, parses the text a second time, so all
of them see the same value.

A body the parser cannot take is refused whole, `400 validation_error` with `details` naming each
problem by its place (`messages.3.to`, or `body` for the body as a whole), and never reaches a
route: text that is not JSON; `NaN` and `Infinity` (Python's parser takes them, JSON has none); an
integer longer than Python converts (`sys.get_int_max_str_digits()`, 4,300 digits by default: the
conversion raises, and an answer to that is no 5xx); a name repeated in one object, at any depth
(the parser would keep the last one silently, and a second `to` would change a send unseen);
nesting deeper than the parser recurses. The problems' places are worked out only for a refused
body: a good one costs one parse.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from sendonce.api.errors import ApiError, validation_error

__all__ = ["INVALID_JSON", "decode_json"]

INVALID_JSON = "The body is not valid JSON."
# A body of many bad objects names the first ones: enough to fix it, and an answer of bounded size.
MAX_DETAILS = 50
_TOO_DEEP = {"field": "body", "message": "the body is not valid JSON: it is nested too deeply"}


class _Refused:
    """A value the parser could not take, left in its place so that the place can be named."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


class _Repeated(dict[str, Any]):
    """An object in which some names appear more than once: it holds the last value of each, and
    keeps the earlier ones, whose own problems are named too."""

    __slots__ = ("names", "shadowed")

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        last = {name: index for index, (name, _) in enumerate(pairs)}
        self.shadowed = [(name, value) for index, (name, value) in enumerate(pairs) if last[name] != index]
        self.names = list(dict.fromkeys(name for name, _ in self.shadowed))


def decode_json(text: str) -> Any:
    """The JSON value of a request body; raises the `400 validation_error` of a body it cannot take."""
    refused = False

    def make_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal refused
        value = dict(pairs)
        if len(value) == len(pairs):
            return value
        refused = True
        return _Repeated(pairs)

    def make_int(digits: str) -> Any:
        nonlocal refused
        try:
            return int(digits)
        except ValueError:  # longer than Python converts
            refused = True
            count = len(digits.lstrip("-"))
            return _Refused(
                f"is a number of {count} digits: at most {sys.get_int_max_str_digits()} are taken"
            )

    def make_constant(name: str) -> Any:
        nonlocal refused
        refused = True
        return _Refused(f"is {name}, which is not JSON")

    if not text.strip():
        raise validation_error([{"field": "body", "message": "is empty: send a JSON object"}], INVALID_JSON)
    try:
        value = json.loads(
            text, object_pairs_hook=make_object, parse_int=make_int, parse_constant=make_constant
        )
    except RecursionError:
        raise validation_error([_TOO_DEEP], INVALID_JSON) from None
    except json.JSONDecodeError as error:
        where = f"{error.msg} at line {error.lineno}, column {error.colno}"
        raise validation_error(
            [{"field": "body", "message": f"the body is not valid JSON: {where}"}], INVALID_JSON
        ) from None
    except ValueError:  # any other conversion the parser could not make: no 5xx either
        raise validation_error(
            [{"field": "body", "message": "the body is not valid JSON"}], INVALID_JSON
        ) from None
    if refused:
        raise _refusal(value)
    return value


def _refusal(value: Any) -> ApiError:
    """The 400 of a parsed body holding refused values or repeated names, each named by its place."""
    details: list[dict[str, str]] = []
    pending: list[tuple[tuple[str, ...], Any]] = [((), value)]
    while pending:
        path, node = pending.pop()
        if isinstance(node, _Refused):
            details.append({"field": _field(path), "message": node.message})
        elif isinstance(node, dict):
            if isinstance(node, _Repeated):
                details.extend(
                    {
                        "field": _field((*path, name)),
                        "message": "is repeated: a field may appear once in an object",
                    }
                    for name in node.names
                )
            children = [*node.items(), *(node.shadowed if isinstance(node, _Repeated) else ())]
            pending.extend(((*path, name), child) for name, child in reversed(children))
        elif isinstance(node, list):
            pending.extend(((*path, str(index)), child) for index, child in reversed(list(enumerate(node))))
    if len(details) > MAX_DETAILS:
        more = len(details) - MAX_DETAILS
        details = [*details[:MAX_DETAILS], {"field": "body", "message": f"and {more} more like these"}]
    return validation_error(details, INVALID_JSON)


def _field(path: tuple[str, ...]) -> str:
    return ".".join(path) or "body"
