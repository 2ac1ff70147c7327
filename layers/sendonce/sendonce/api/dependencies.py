"""What the API's handlers need, in one object, and where they find it: `root`.

This module composes nothing: `ApiDependencies` names the use cases and ports the handlers call,
and the API function's entry point (`sendonce.entrypoints.api`) builds it, with its adapters, and
gives `root` its build function. A test puts its own object in with `root.use(...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
from msgspec import Struct

from sendonce.api.answers import send_answer
from sendonce.api.idempotency import SendOnce, StoredAnswer
from sendonce.auth.api_keys import ApiKeyStore
from sendonce.composition import Root
from sendonce.errors import DependencyUnavailable
from sendonce.limits.service import RequestLimits
from sendonce.messages.service import MessageService, SendCommand
from sendonce.secret_values import Secret, no_secret
from sendonce.settings import ApiSettings
from sendonce.suppressions.service import SuppressionService

if TYPE_CHECKING:  # imported when a batch, the webhooks' use cases, or a provider event first need them
    from sendonce.activity.service import ActivityService
    from sendonce.api.batch import SendMany
    from sendonce.campaigns.service import CampaignService
    from sendonce.erasures.service import ErasureService
    from sendonce.messages.batch import BatchOutcome
    from sendonce.provider_events.ports import EventQueue
    from sendonce.simulator.ports import SimulatorDeliveries
    from sendonce.status_webhooks.service import WebhookService
    from sendonce.templates.service import TemplateService


def _no_test_deliveries() -> SimulatorDeliveries:
    from sendonce.simulator.ports import NoDeliveries  # noqa: PLC0415

    return NoDeliveries()


def _no_templates() -> TemplateService | None:
    return None


def _no_batches(commands: Sequence[SendCommand]) -> list[BatchOutcome]:
    raise DependencyUnavailable("no batch sender is configured")


def _no_campaigns() -> CampaignService | None:
    return None


def _no_activity() -> ActivityService | None:
    return None


def _no_erasures() -> ErasureService | None:
    return None


def _run_once(**arguments: Any) -> StoredAnswer:
    """`sendonce.api.batch.run_once`, its module loaded with the first batch."""
    from sendonce.api.batch import run_once  # noqa: PLC0415

    return run_once(**arguments)


class ApiDependencies(Struct, frozen=True, dict=True):
    settings: ApiSettings
    messages: MessageService
    idempotency_config: IdempotencyConfig
    # `send_once(request={"workspace", "key", "payload"}, command=...)`: at most once per key.
    send_once: SendOnce
    events: EventQueue
    # The status webhooks' use cases, built on first use (`webhooks`): a send never needs them.
    build_webhooks: Callable[[], WebhookService]
    # The caller's API key -> its workspace, checked by the preflight before any route runs.
    api_keys: ApiKeyStore
    # The HTTP provider's signing secret, read when a provider event arrives (cached).
    provider_events_secret: Secret = no_secret
    # Twilio's auth token, which signs its status callbacks, read when one arrives (cached). None:
    # this deployment names no Twilio credentials, and /v1/webhooks/twilio is no route of it (404).
    twilio_auth_token: Secret | None = None
    # POST /v1/messages/batch: keyless items in bulk, and the batch under its own Idempotency-Key.
    send_many: SendMany = _no_batches
    send_batch_once: SendOnce = _run_once
    # The request rate (checked right after the API key) and usage; None: nothing is limited. It
    # holds this execution environment's rate leases (sendonce.limits.service).
    limits: RequestLimits | None = None
    # The workspace's suppression list (/v1/suppressions); None: the routes answer 503.
    suppressions: SuppressionService | None = None
    # What the simulator accepted for a test twin's messages (GET /v1/test/deliveries), built on
    # first use (`test_deliveries`): a send never needs it.
    build_test_deliveries: Callable[[], SimulatorDeliveries] = _no_test_deliveries
    # The templates' use cases, built on first use (`templates`): a send without one never needs
    # them. None: the template routes answer 503.
    build_templates: Callable[[], TemplateService | None] = _no_templates
    # The campaigns' use cases, built on first use (`campaigns`); None: the routes answer 503. A
    # campaign's create under an Idempotency-Key runs once (`create_campaign_once(request=, run=)`).
    build_campaigns: Callable[[], CampaignService | None] = _no_campaigns
    create_campaign_once: SendOnce = _run_once
    # A message's timeline and the promise's daily counts, built on first use (`activity`): a new
    # send never needs them. None: their routes answer 503, and nothing is counted.
    build_activity: Callable[[], ActivityService | None] = _no_activity
    # Erasures (/v1/erasures), built on first use (`erasures`); None: their routes answer 503.
    build_erasures: Callable[[], ErasureService | None] = _no_erasures

    def send(self, command: SendCommand) -> StoredAnswer:
        return send_answer(self.messages.send(command))

    @cached_property
    def webhooks(self) -> WebhookService:
        return self.build_webhooks()

    @cached_property
    def test_deliveries(self) -> SimulatorDeliveries:
        return self.build_test_deliveries()

    @cached_property
    def templates(self) -> TemplateService | None:
        return self.build_templates()

    @cached_property
    def campaigns(self) -> CampaignService | None:
        return self.build_campaigns()

    @cached_property
    def activity(self) -> ActivityService | None:
        return self.build_activity()

    @cached_property
    def erasures(self) -> ErasureService | None:
        return self.build_erasures()


# Built by the API function's entry point (`sendonce.entrypoints.api.build`), which gives it its
# build function when it is imported.
root: Root[ApiDependencies] = Root()
