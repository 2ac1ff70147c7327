"""`sendonce suppressions list|add|remove`: a workspace's suppression list, for an operator.

The same use cases as the API's /v1/suppressions (`sendonce.suppressions.service`), on the local
stack's table or a deployed one, so an entry added here is exactly one the API would have added.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from sendonce.adapters.dynamodb_suppressions import DynamoDbSuppressionStore
from sendonce.api.shapes import SuppressionModel, to_json
from sendonce.keyed_hash import KeyedHash
from sendonce.observability import logger
from sendonce.suppressions.model import Suppression
from sendonce.suppressions.service import SuppressionService

PAGE = 100


def service(dynamodb: Any, table: str, keyed_hash: KeyedHash) -> SuppressionService:
    return SuppressionService(DynamoDbSuppressionStore(dynamodb, table, keyed_hash))


def every_entry(suppressions: SuppressionService, workspace: str) -> Iterator[Suppression]:
    """The whole list, newest first, page after page."""
    cursor = None
    while True:
        page = suppressions.list(workspace, PAGE, cursor)
        yield from page.suppressions
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def line(entry: Suppression) -> str:
    """The entry as the API shows it (`GET /v1/suppressions/{to}`), on one line."""
    return to_json(SuppressionModel.of(entry))


class Quiet:
    """The package's info lines would mix with the answer on stdout: warnings only, meanwhile."""

    def __enter__(self) -> None:
        self._level = logger.log_level
        logger.setLevel(logging.WARNING)

    def __exit__(self, *_: object) -> None:
        logger.setLevel(self._level)
