"""The classification table, row by row: each provider's adapter, made to fail the way a row names,
raises the failure its verdict stands for, which the dispatcher reads as failover, retry, ask or end.

Every row is tried through the real adapter (no sockets: fake openers and botocore stubs), so the
table is what the providers do, not a description of it."""

from __future__ import annotations

import http.client
import io
import urllib.error
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sendonce.dispatch.ports import ProviderThrottled
from sendonce.errors import (
    AmbiguousOutcome,
    DispatchFailure,
    NotAccepted,
    PermanentFailure,
    ProviderRefused,
    ProviderUnreachable,
    TransientFailure,
)
from sendonce.messages.model import Channel, Message, Status
from sendonce.providers.classification import REQUIRED_SIGNALS, TABLE, Row, Verdict, row_for
from sendonce.providers.http_provider import HttpProvider

from tests.unit.aws_faults import ses_fault, sms_v2_fault, sns_fault
from tests.unit.twilio_fakes import twilio_fault

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class _Opener:
    def __init__(self, error: BaseException) -> None:
        self._error = error

    def open(self, request: Any, timeout: float) -> Any:
        raise self._error


def _http_error(status: int) -> urllib.error.HTTPError:
    return urllib.error.HTTPError("http://provider.test/messages", status, "x", {}, io.BytesIO(b"{}"))  # type: ignore[arg-type]


def http_fault(signal: str) -> Exception:
    """What HttpProvider.send raises when its call fails as `signal` says."""
    kind, _, value = signal.partition(":")
    error: BaseException
    if signal == "connect_failed":
        error = urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))
    elif signal == "timeout":
        error = TimeoutError("timed out")
    elif signal == "unreadable_answer":
        error = http.client.BadStatusLine("garbage")
    elif kind == "status":
        error = _http_error({"3xx": 302, "4xx": 403, "5xx": 503}.get(value) or int(value))
    else:
        raise ValueError(f"no fault for the signal {signal!r}")
    message = Message(
        id="msg_01JDZ0000000000000000000000",
        workspace_id="ws_a",
        channel=Channel("sms"),
        to="+15550100000",
        body="hello",
        status=Status.SENDING,
        created_at=T0,
        updated_at=T0,
    )
    try:
        HttpProvider("http://provider.test", "token", 5.0, opener=_Opener(error)).send(message)
    except Exception as raised:  # the failure itself is the answer
        return raised
    raise AssertionError(f"the send went through despite {signal}")


FAULTS: dict[str, Callable[[str], Exception]] = {
    "http": http_fault,
    "twilio": twilio_fault,
    "sms-v2": sms_v2_fault,
    "sns": sns_fault,
    "ses": ses_fault,
}

# What the dispatcher does with each verdict is decided by the failure's class alone.
KINDS: dict[Verdict, type[DispatchFailure]] = {
    Verdict.REJECTED: PermanentFailure,
    Verdict.NOT_ACCEPTED: ProviderRefused,
    Verdict.UNREACHABLE: ProviderUnreachable,
    Verdict.THROTTLED: ProviderThrottled,
    Verdict.RETRY_HERE: TransientFailure,
    Verdict.MAYBE_TAKEN: AmbiguousOutcome,
}


@pytest.mark.parametrize("row", TABLE, ids=[f"{row.provider}-{row.signal}" for row in TABLE])
def test_each_row_is_what_its_provider_raises(row: Row) -> None:
    raised = FAULTS[row.provider](row.signal)

    assert type(raised) is KINDS[row.verdict], f"{row.provider} {row.signal}: {raised!r}"
    # Only a provider that provably did not take the message lets the next one try.
    assert isinstance(raised, NotAccepted) is (row.verdict in {Verdict.NOT_ACCEPTED, Verdict.UNREACHABLE})


@pytest.mark.parametrize("provider", sorted(FAULTS))
def test_every_provider_has_a_verdict_for_every_failure(provider: str) -> None:
    for signal in REQUIRED_SIGNALS:
        assert row_for(provider, (signal,)).provider == provider


@pytest.mark.parametrize("provider", sorted(FAULTS))
def test_a_timeout_or_a_5xx_never_fails_over_by_itself(provider: str) -> None:
    for signal in ("timeout", "status:5xx", "status:500", "status:503"):
        assert row_for(provider, (signal, "status:5xx")).verdict in {Verdict.RETRY_HERE, Verdict.MAYBE_TAKEN}


def test_the_registry_and_the_table_know_the_same_providers() -> None:
    from sendonce.entrypoints.shared.provider_registry import PROVIDERS  # noqa: PLC0415

    assert {row.provider for row in TABLE} == set(PROVIDERS) == set(FAULTS)
