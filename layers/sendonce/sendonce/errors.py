"""Domain errors. Each names what went wrong; the HTTP layer alone decides how to answer it."""

from __future__ import annotations


class SendonceError(Exception):
    """Base of every error the domain raises on purpose."""


class MessageNotFound(SendonceError):
    pass


class MessageNotCancelable(SendonceError):
    def __init__(self, status: str) -> None:
        super().__init__(f"a message that is {status} can no longer be canceled")
        self.status = status


class MessageNotEditable(SendonceError):
    """Only a scheduled message can be edited, until its delivery is claimed."""

    def __init__(self, status: str) -> None:
        super().__init__(
            f"this message is {status} and can no longer be edited: a message can be edited only "
            "while it is scheduled, until its delivery starts"
        )
        self.status = status


class DuplicateContent(SendonceError):
    """An edit's new content is the dedup identity of another message in the window."""

    def __init__(self, message_id: str) -> None:
        super().__init__(f"message {message_id} already has this content for this recipient")
        self.message_id = message_id


class InvalidEdit(SendonceError):
    """An edit the message's channel does not allow: answered 400 validation_error on `field`."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class IdempotencyKeyReused(SendonceError):
    def __init__(
        self, reason: str = "this Idempotency-Key was already used with a different request"
    ) -> None:
        super().__init__(reason)


class RecipientSuppressed(SendonceError):
    """The recipient is on the workspace's suppression list: nothing was written."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"this recipient is on the workspace's suppression list ({reason})")
        self.reason = reason


class SuppressionNotFound(SendonceError):
    pass


class TemplateNotFound(SendonceError):
    """No live template has that name (or that version) in the workspace."""


class UnknownTemplate(SendonceError):
    """A send names a template (or a version) that no live template of its workspace has for its
    channel: the send is refused (422), where a template route answers TemplateNotFound (404)."""


class TemplateExists(SendonceError):
    """A live template already has that name in the workspace."""


class InvalidTemplate(SendonceError):
    """A template's field breaks its channel's rules or does not parse: answered 400 validation_error
    on `field`."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class TemplateDataInvalid(SendonceError):
    """A render refused: the data's missing variables, the bound it went over (`limit`), what the
    sandbox refused (`reason`), or the message field its output does not fit (`field`, a send's
    render); `details` is what the API shows of it."""

    def __init__(
        self,
        message: str,
        *,
        missing: list[str] | None = None,
        limit: str | None = None,
        reason: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.details: dict[str, object] = {
            name: value
            for name, value in (("missing", missing), ("limit", limit), ("reason", reason), ("field", field))
            if value is not None
        }


class DependencyUnavailable(SendonceError):
    """A dependency failed and nothing was written: safe for the caller to retry."""


class QueueUnavailable(SendonceError):
    """The hand-off to the queue failed; the message stays owed to it."""


class InvalidCursor(SendonceError):
    pass


class RetryLater(SendonceError):
    """Not now: the queued record of this work goes back to its queue and returns after `seconds`."""

    def __init__(self, seconds: int, reason: str = "") -> None:
        super().__init__(reason or f"retry in {seconds} s")
        self.seconds = seconds


class DispatchFailure(SendonceError):
    """A provider call that did not take the message; `code` names the cause on the message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class PermanentFailure(DispatchFailure):
    """The provider refused the message (4xx): retrying cannot help."""


class TransientFailure(DispatchFailure):
    """The provider did not take the message (5xx, throttling, no connection): safe to retry."""


class AmbiguousOutcome(DispatchFailure):
    """The request may have reached the provider, but its answer was lost."""


class NotAccepted(DispatchFailure):
    """The provider provably did not take the message: the next provider of its channel's list may
    be tried at once, and no message can be sent twice for it."""


class ProviderUnreachable(TransientFailure, NotAccepted):
    """The request never left (no connection, no credentials): the next provider; with none left,
    retried here like any transient failure."""


class ProviderRefused(PermanentFailure, NotAccepted):
    """The provider answered that it does not take the message, for a reason that is not the
    recipient or the content (the sender, the account): the next provider; with none left, failed."""


class EndpointNotFound(SendonceError):
    pass


class EventNotFound(SendonceError):
    pass


class RotationConflict(SendonceError):
    """Other rotations of the endpoint's secret were written first, try after try: nothing was
    rotated by this one, and it is safe to ask again."""

    def __init__(self, attempts: int) -> None:
        super().__init__(
            f"the secret of this endpoint was rotated by other requests during each of {attempts} tries"
        )
        self.attempts = attempts


class TooManyRotations(SendonceError):
    """The endpoint signs with as many replaced secrets as it may: no rotation until the oldest
    stops, `retry_after_seconds` from now. Nothing was rotated."""

    def __init__(self, replaced: int, retry_after_seconds: int) -> None:
        super().__init__(
            f"this endpoint already signs with {replaced} secrets it replaced within the last 24 hours"
        )
        self.replaced = replaced
        self.retry_after_seconds = retry_after_seconds


class InvalidEndpoint(SendonceError):
    """`field` and a message the customer can act on: answered 400 validation_error."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class QuotaExceeded(SendonceError):
    """The workspace's daily send quota is used up; it resets at the next UTC midnight."""

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__("the daily send quota of this workspace is used up; it resets at 00:00 UTC")
        self.retry_after_seconds = retry_after_seconds


class SmsBudgetExceeded(SendonceError):
    """The workspace's daily sms budget has no room for the message's segments; it resets at the
    next UTC midnight."""

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__("the daily sms budget of this workspace has no room for this message's segments")
        self.retry_after_seconds = retry_after_seconds


class DestinationNotAllowed(SendonceError):
    """The workspace does not send to this phone number: its country is not among the workspace's,
    or it is premium-rate or shared-cost (`reason`, `sendonce.controls.destinations.Refused`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the workspace does not send to this destination ({reason.replace('_', ' ')})")
        self.reason = reason


class RecipientCapped(SendonceError):
    """The workspace's frequency cap allows no more new messages to this recipient for now."""

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__("this recipient has had as many messages as the workspace's frequency cap allows")
        self.retry_after_seconds = retry_after_seconds


class TooManyCappedRecipients(SendonceError):
    """Under a frequency cap, a message's recipients are each counted in its one write: it names
    at most `limit` of them. Answered 400 validation_error, on `to`."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"under this workspace's frequency cap, a message names at most {limit} recipients")
        self.field = "to"


class RateLimited(SendonceError):
    """The workspace's request rate is used up for the current window."""

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__("too many requests for this workspace; retry after the window resets")
        self.retry_after_seconds = retry_after_seconds


class CampaignNotFound(SendonceError):
    """No campaign of the workspace has that id."""


class CampaignFinished(SendonceError):
    """The campaign is completed or canceled: nothing changes it any more."""

    def __init__(self, status: str) -> None:
        super().__init__(
            f"this campaign is {status}: it can no longer be started, paused, resumed or canceled"
        )
        self.status = status


class RecipientsNotReady(SendonceError):
    """A campaign without recipients inline started before its list was uploaded, or with a list
    over the limits."""
