"""What every provider's failure means for the message: one table, one row per provider and signal.

Failover may never send twice, so a provider's failure moves a message to the next provider only
when it provably did not take it: the request never left (`connect_failed`), or the provider
answered that it does not take it for a reason that is not the recipient or the content (the
sender, the account), or it kept throttling past its retry budget. A refusal of the recipient or
the content fails the message: no other provider would do better. A timeout or a 5xx after the
request left may have been taken: retried where the provider dedups on the message id, asked where
it can be asked, else `unknown`; never the next provider by itself.

An adapter names what happened as signals, most specific first (`code:21211`, `status:400`,
`status:4xx`); the first signal with a row for the provider decides. Each provider has a row for
`connect_failed`, `timeout`, `unreadable_answer`, `status:4xx` and `status:5xx`, so every failure
has a verdict (a test holds the table to that, and tries every row through its adapter).
An answer that is neither 2xx nor one of those (a 1xx) reads as `unreadable_answer`.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from msgspec import Struct

from sendonce.dispatch.ports import ProviderThrottled
from sendonce.errors import (
    AmbiguousOutcome,
    DispatchFailure,
    PermanentFailure,
    ProviderRefused,
    ProviderUnreachable,
    TransientFailure,
)


class Verdict(StrEnum):
    REJECTED = "rejected"  # the recipient or the content: failed, no other provider is tried
    NOT_ACCEPTED = "not_accepted"  # refused for the sender or the account: the next provider at once
    UNREACHABLE = "unreachable"  # the request never left: the next provider at once (the last: retried)
    THROTTLED = "throttled"  # not taken, for rate: retried here on time, past the budget the next one
    RETRY_HERE = "retry_here"  # may have been taken; the provider dedups on the id: repeated there
    MAYBE_TAKEN = "maybe_taken"  # may have been taken: asked where it can be, else `unknown`


class Row(Struct, frozen=True):
    provider: str
    signal: str
    verdict: Verdict
    why: str


# Every provider's generic rows: the request never left, or its answer was lost.
def _generic(provider: str, server_error: Verdict, timeout: Verdict = Verdict.MAYBE_TAKEN) -> tuple[Row, ...]:
    return (
        Row(provider, "connect_failed", Verdict.UNREACHABLE, "no connection: the request never left"),
        Row(provider, "timeout", timeout, "the request left and its answer was lost"),
        Row(provider, "unreadable_answer", Verdict.MAYBE_TAKEN, "an answer that cannot be read"),
        Row(provider, "status:5xx", server_error, "a server fault after the request arrived"),
        Row(provider, "status:429", Verdict.THROTTLED, "too many requests"),
        Row(provider, "status:4xx", Verdict.NOT_ACCEPTED, "refused, not for the recipient or content"),
        Row(provider, "status:3xx", Verdict.NOT_ACCEPTED, "a redirect, never followed: nothing was taken"),
    )


TABLE: tuple[Row, ...] = (
    # The HTTP provider (README, "Delivery"): it dedups on the Idempotency-Key, the message id.
    *_generic("http", server_error=Verdict.RETRY_HERE),
    Row("http", "status:400", Verdict.REJECTED, "the request's recipient or content is refused"),
    Row("http", "status:413", Verdict.REJECTED, "the content is too large"),
    Row("http", "status:422", Verdict.REJECTED, "the recipient or content is refused"),
    Row("http", "status:408", Verdict.UNREACHABLE, "the provider gave up waiting for the request"),
    # Twilio's Messages API: the error's `code` says why (its error dictionary).
    *_generic("twilio", server_error=Verdict.MAYBE_TAKEN),
    Row("twilio", "code:21211", Verdict.REJECTED, "invalid 'To' phone number"),
    Row("twilio", "code:21614", Verdict.REJECTED, "'To' is not a valid mobile number"),
    Row("twilio", "code:21610", Verdict.REJECTED, "the recipient replied STOP"),
    Row("twilio", "code:21612", Verdict.REJECTED, "'To' is not reachable by sms"),
    Row("twilio", "code:21602", Verdict.REJECTED, "the body is required"),
    Row("twilio", "code:21617", Verdict.REJECTED, "the body exceeds 1,600 characters"),
    Row("twilio", "code:21408", Verdict.NOT_ACCEPTED, "the account may not send to that region"),
    Row("twilio", "code:21606", Verdict.NOT_ACCEPTED, "'From' is not the account's sms number"),
    Row("twilio", "code:21212", Verdict.NOT_ACCEPTED, "'From' is not valid"),
    Row("twilio", "code:20003", Verdict.NOT_ACCEPTED, "authentication failed"),
    Row("twilio", "code:20404", Verdict.NOT_ACCEPTED, "no such account or resource"),
    Row("twilio", "code:20429", Verdict.THROTTLED, "too many requests"),
    Row("twilio", "code:21611", Verdict.THROTTLED, "'From' has too many queued messages"),
    Row("twilio", "status:400", Verdict.REJECTED, "a parameter of the message is refused"),
    # AWS End User Messaging SMS (pinpoint-sms-voice-v2), SendTextMessage.
    *_generic("sms-v2", server_error=Verdict.MAYBE_TAKEN),
    Row("sms-v2", "aws:ValidationException", Verdict.REJECTED, "the recipient or content is invalid"),
    Row("sms-v2", "aws:ConflictException", Verdict.REJECTED, "the recipient opted out"),
    Row("sms-v2", "aws:AccessDeniedException", Verdict.NOT_ACCEPTED, "the account may not send"),
    Row("sms-v2", "aws:ResourceNotFoundException", Verdict.NOT_ACCEPTED, "no configuration set or origin"),
    Row("sms-v2", "aws:ServiceQuotaExceededException", Verdict.THROTTLED, "a spend or rate quota"),
    Row("sms-v2", "aws:ThrottlingException", Verdict.THROTTLED, "too many requests"),
    Row("sms-v2", "aws:InternalServerException", Verdict.MAYBE_TAKEN, "a server fault"),
    Row("sms-v2", "aws:RequestTimeoutException", Verdict.UNREACHABLE, "the service gave up on the request"),
    # Amazon SNS, Publish to a phone number.
    *_generic("sns", server_error=Verdict.MAYBE_TAKEN),
    Row("sns", "aws:InvalidParameter", Verdict.REJECTED, "the phone number or message is invalid"),
    Row("sns", "aws:ParameterValueInvalid", Verdict.REJECTED, "the phone number or message is invalid"),
    Row("sns", "aws:AuthorizationError", Verdict.NOT_ACCEPTED, "the function may not publish"),
    Row("sns", "aws:Throttled", Verdict.THROTTLED, "too many requests"),
    Row("sns", "aws:Throttling", Verdict.THROTTLED, "too many requests"),
    Row("sns", "aws:KMSThrottling", Verdict.THROTTLED, "too many requests"),
    Row("sns", "aws:InternalError", Verdict.MAYBE_TAKEN, "a server fault"),
    Row("sns", "aws:RequestTimeout", Verdict.UNREACHABLE, "the service gave up on the request"),
    # Amazon SES (v2), SendEmail.
    *_generic("ses", server_error=Verdict.MAYBE_TAKEN),
    Row("ses", "aws:MessageRejected", Verdict.REJECTED, "the content is refused"),
    Row("ses", "aws:BadRequestException", Verdict.REJECTED, "an address or the content is invalid"),
    Row("ses", "aws:AccountSuspendedException", Verdict.NOT_ACCEPTED, "the account may not send"),
    Row("ses", "aws:SendingPausedException", Verdict.NOT_ACCEPTED, "sending is paused"),
    Row("ses", "aws:MailFromDomainNotVerifiedException", Verdict.NOT_ACCEPTED, "the sender is unverified"),
    Row("ses", "aws:NotFoundException", Verdict.NOT_ACCEPTED, "no such configuration set"),
    Row("ses", "aws:LimitExceededException", Verdict.THROTTLED, "a sending quota"),
    Row("ses", "aws:TooManyRequestsException", Verdict.THROTTLED, "too many requests"),
    Row("ses", "aws:Throttling", Verdict.THROTTLED, "too many requests"),
    Row("ses", "aws:InternalFailure", Verdict.MAYBE_TAKEN, "a server fault"),
    Row("ses", "aws:RequestTimeout", Verdict.UNREACHABLE, "the service gave up on the request"),
)

# Every signal a provider's adapter must be able to name: each provider has a row for each.
REQUIRED_SIGNALS = (
    "connect_failed",
    "timeout",
    "unreadable_answer",
    "status:5xx",
    "status:429",
    "status:4xx",
)

_BY_KEY: dict[tuple[str, str], Row] = {}
for _row in TABLE:
    if (_row.provider, _row.signal) in _BY_KEY:
        raise ValueError(f"two rows for {_row.provider} {_row.signal}")
    _BY_KEY[_row.provider, _row.signal] = _row

_FAILURES: dict[Verdict, tuple[type[DispatchFailure], str]] = {
    Verdict.REJECTED: (PermanentFailure, "provider_rejected"),
    Verdict.NOT_ACCEPTED: (ProviderRefused, "provider_rejected"),
    Verdict.UNREACHABLE: (ProviderUnreachable, "provider_unreachable"),
    Verdict.THROTTLED: (ProviderThrottled, "provider_throttled"),
    Verdict.RETRY_HERE: (TransientFailure, "provider_unavailable"),
    Verdict.MAYBE_TAKEN: (AmbiguousOutcome, "provider_error"),
}


def status_signals(status: int) -> tuple[str, ...]:
    """An HTTP status as signals, the exact one first: 403 is `status:403`, then `status:4xx`; a
    status outside 300-599 also as `unreadable_answer`."""
    exact = (f"status:{status}", f"status:{status // 100}xx")
    return exact if 300 <= status <= 599 else (*exact, "unreadable_answer")


def row_for(provider: str, signals: Iterable[str]) -> Row:
    """The row that decides: the first signal the provider has a row for."""
    named = tuple(signals)
    for signal in named:
        row = _BY_KEY.get((provider, signal))
        if row is not None:
            return row
    raise LookupError(f"no row of {provider} for any of {named}")


def failure(provider: str, signals: Iterable[str], detail: str) -> DispatchFailure:
    """The failure a provider's adapter raises for what happened (`signals`, most specific first)."""
    row = row_for(provider, signals)
    kind, code = _FAILURES[row.verdict]
    if row.verdict is Verdict.MAYBE_TAKEN and row.signal == "timeout":
        code = "provider_timeout"
    return kind(code, f"{provider}: {row.why} ({detail})")
