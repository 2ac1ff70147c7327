"""Lambda's event filtering of an event source mapping (`FilterCriteria`), as the local stack applies it.

A record is passed to the function when any filter's pattern matches it; one that matches none is
passed over, as done, as Lambda drops it. A pattern matches when each of its keys matches the
record's value there: a list of allowed values (any one equal), or of the operators sendonce's
template uses (`exists`, `prefix`, `anything-but`); an object goes one level down. Any other
operator is refused when the template is read, so the local stack never filters differently from
Lambda without saying so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

OPERATORS = frozenset({"exists", "prefix", "anything-but"})


def parse_filters(filter_criteria: Any, where: str) -> tuple[dict[str, Any], ...]:
    """The patterns of a `FilterCriteria: {Filters: [{Pattern: ...}]}`, each checked."""
    if not filter_criteria:
        return ()
    patterns = []
    for entry in filter_criteria.get("Filters") or []:
        pattern = entry.get("Pattern")
        parsed = json.loads(pattern) if isinstance(pattern, str) else pattern
        if not isinstance(parsed, dict):
            raise ValueError(f"{where}: a filter pattern must be a JSON object")
        _check(parsed, where)
        patterns.append(parsed)
    return tuple(patterns)


def _check(pattern: dict[str, Any], where: str) -> None:
    for key, rule in pattern.items():
        if isinstance(rule, dict):
            _check(rule, where)
        elif isinstance(rule, list):
            for allowed in rule:
                if isinstance(allowed, dict) and not set(allowed) <= OPERATORS:
                    raise ValueError(f"{where}: filter operator {sorted(allowed)} is not emulated")
        else:
            raise ValueError(f"{where}: the filter rule of {key!r} must be a list or an object")


def passes(patterns: Sequence[dict[str, Any]], record: dict[str, Any]) -> bool:
    """Whether a record reaches the function: no filters, or one whose pattern matches."""
    return not patterns or any(_matches(pattern, record) for pattern in patterns)


_ABSENT = object()


def _matches(pattern: dict[str, Any], value: Any) -> bool:
    for key, rule in pattern.items():
        found = value.get(key, _ABSENT) if isinstance(value, dict) else _ABSENT
        if isinstance(rule, dict):
            if found is _ABSENT or not _matches(rule, found):
                return False
        elif not any(_allows(allowed, found) for allowed in rule):
            return False
    return True


def _allows(allowed: Any, found: Any) -> bool:
    if not isinstance(allowed, dict):
        return found is not _ABSENT and found == allowed
    if "exists" in allowed:
        return (found is not _ABSENT) is bool(allowed["exists"])
    if "prefix" in allowed:
        return isinstance(found, str) and found.startswith(str(allowed["prefix"]))
    excluded = allowed["anything-but"]
    excluded = excluded if isinstance(excluded, list) else [excluded]
    return found is not _ABSENT and found not in excluded
