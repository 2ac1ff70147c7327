"""Live and test mode: every workspace has a test twin, its own workspace (README, "Test mode").

The invariant: a workspace's mode is a property of its id, and nothing else. The twin of `W` is the
workspace `W:test`; a live workspace id never ends with `:test` (`issue_api_key` refuses one), so no
live workspace can be a twin, nor a twin anyone's live workspace. Every read and write is scoped by
workspace already, so the twin's keys, locks, messages, endpoints, suppressions and usage are apart
from the live workspace's with no check of their own; and since a message names its workspace, it
carries its mode to the dispatcher, which hands a test message to the simulator and to nothing else.

A test key starts with `sk_test_` and is stored against the twin's id; a key whose prefix and
workspace disagree opens nothing.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import overload

TEST_SUFFIX = ":test"
TEST_KEY_PREFIX = "sk_test_"
LIVE_KEY_PREFIX = "sk_live_"
# Test messages, their events and what the simulator recorded are removed by DynamoDB's TTL after this.
TEST_DATA_RETENTION = timedelta(days=7)


class Mode(StrEnum):
    LIVE = "live"
    TEST = "test"


def is_test_workspace(workspace_id: str) -> bool:
    return workspace_id.endswith(TEST_SUFFIX)


def mode_of(workspace_id: str) -> Mode:
    return Mode.TEST if is_test_workspace(workspace_id) else Mode.LIVE


def twin_of(workspace_id: str) -> str:
    """The test twin of a live workspace."""
    if is_test_workspace(workspace_id):
        raise ValueError(f"{workspace_id!r} is a test twin already")
    return workspace_id + TEST_SUFFIX


def live_workspace_of(workspace_id: str) -> str:
    """The live workspace a workspace is, or is the twin of."""
    return workspace_id.removesuffix(TEST_SUFFIX)


def mode_of_key(api_key: str) -> Mode:
    return Mode.TEST if api_key.startswith(TEST_KEY_PREFIX) else Mode.LIVE


@overload
def retention_for(workspace_id: str, live: timedelta) -> timedelta: ...
@overload
def retention_for(workspace_id: str, live: timedelta | None) -> timedelta | None: ...
def retention_for(workspace_id: str, live: timedelta | None) -> timedelta | None:
    """How long a workspace's messages and events are kept: `live` (None: for good), 7 days in a twin."""
    return TEST_DATA_RETENTION if is_test_workspace(workspace_id) else live
