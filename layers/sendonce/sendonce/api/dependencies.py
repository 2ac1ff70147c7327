"""The composition root of the API function: one object, built from its settings on first use."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

from sendonce.adapters.dynamodb_api_keys import DynamoDbApiKeyStore
from sendonce.adapters.dynamodb_limits import DynamoDbLimits
from sendonce.adapters.dynamodb_sending import DynamoDbSendingStore
from sendonce.adapters.dynamodb_simulator import DynamoDbSimulatorStore
from sendonce.adapters.dynamodb_suppressions import DynamoDbSuppressionStore
from sendonce.adapters.secrets_manager import SecretsManagerSecret
from sendonce.adapters.sqs_queue import SqsEventQueue, SqsMessageQueue
from sendonce.api.answers import send_answer
from sendonce.api.batch import BATCH_KEY_PREFIX, SendMany, run_once
from sendonce.api.idempotency import SendOnce, StoredAnswer, idempotency_config, make_idempotent
from sendonce.auth.api_keys import ApiKeyStore
from sendonce.auth.key_cache import CachedApiKeyStore
from sendonce.aws_clients import client, client_on_first_use
from sendonce.composition import Root
from sendonce.errors import DependencyUnavailable
from sendonce.limits.model import Limits
from sendonce.limits.service import RequestLimits
from sendonce.messages.batch import BatchOutcome, BatchSender
from sendonce.messages.service import MessageService, SendCommand
from sendonce.provider_events.ports import EventQueue
from sendonce.secret_values import Secret, no_secret
from sendonce.settings import ApiSettings
from sendonce.simulator.ports import NoDeliveries, SimulatorDeliveries
from sendonce.suppressions.service import SuppressionService

if TYPE_CHECKING:  # imported when the webhooks' use cases are first needed (_webhooks)
    from sendonce.webhooks.service import WebhookService


def _no_batches(commands: Sequence[SendCommand]) -> list[BatchOutcome]:
    raise DependencyUnavailable("no batch sender is configured")


# A secret read must not hold a provider's webhook longer than its patience.
SECRET_READ_TIMEOUT_SECONDS = 3


@dataclass(frozen=True)
class ApiDependencies:
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
    # The HTTP provider's webhook signing secret, read when a webhook arrives (cached).
    webhook_secret: Secret = no_secret
    # POST /v1/messages/batch: keyless items in bulk, and the batch under its own Idempotency-Key.
    send_many: SendMany = _no_batches
    send_batch_once: SendOnce = run_once
    # The request rate (checked right after the API key) and usage; None: nothing is limited. It
    # holds this execution environment's rate leases (sendonce.limits.service).
    limits: RequestLimits | None = None
    # The workspace's suppression list (/v1/suppressions); None: the routes answer 503.
    suppressions: SuppressionService | None = None
    # What the simulator accepted for a test twin's messages (GET /v1/test/deliveries).
    test_deliveries: SimulatorDeliveries = field(default_factory=NoDeliveries)

    def send(self, command: SendCommand) -> StoredAnswer:
        return send_answer(self.messages.send(command))

    @cached_property
    def webhooks(self) -> WebhookService:
        return self.build_webhooks()


def build(settings: ApiSettings | None = None) -> ApiDependencies:
    settings = settings or ApiSettings.from_environment()
    # A send calls DynamoDB only (its hand-off follows from the table's stream): SQS, for edits,
    # provider events and webhooks, is built by its first call.
    dynamodb, sqs = client("dynamodb"), client_on_first_use("sqs")
    limits = None
    if settings.limits_table:
        limits = DynamoDbLimits(
            dynamodb,
            settings.limits_table,
            defaults=Limits(settings.rate_limit_per_second, settings.daily_send_quota),
            cache_seconds=settings.limits_cache_seconds,
        )
    store = DynamoDbSendingStore(
        dynamodb,
        settings.messages_table,
        retention=timedelta(days=settings.message_retention_days),
        quota=limits,
    )
    queue = SqsMessageQueue(sqs, settings.queue_urls)
    dedup_window = timedelta(seconds=settings.dedup_window_seconds)
    suppressions = DynamoDbSuppressionStore(dynamodb, settings.messages_table)
    messages = MessageService(
        store=store, queue=queue, dedup_window=dedup_window, limits=limits, suppressions=suppressions
    )
    batches = BatchSender(store=store, dedup_window=dedup_window, limits=limits, suppressions=suppressions)
    config = idempotency_config(settings.idempotency_ttl_seconds)
    api_keys = CachedApiKeyStore(
        DynamoDbApiKeyStore(dynamodb, settings.api_keys_table),
        ttl=timedelta(seconds=settings.api_key_cache_seconds),
    )

    def send(*, request: dict[str, Any], command: SendCommand) -> StoredAnswer:
        """The once-only part: its answer is what an Idempotency-Key replays."""
        return send_answer(messages.send(command))

    return ApiDependencies(
        settings=settings,
        messages=messages,
        idempotency_config=config,
        send_once=make_idempotent(send, settings.idempotency_table, dynamodb, config),
        events=SqsEventQueue(sqs, settings.events_queue_url),
        build_webhooks=partial(_webhooks, settings, dynamodb, sqs),
        api_keys=api_keys,
        webhook_secret=SecretsManagerSecret(
            settings.webhook_secret_arn,
            partial(client, "secretsmanager", timeout_seconds=SECRET_READ_TIMEOUT_SECONDS),
        ),
        send_many=batches.send_many,
        send_batch_once=make_idempotent(
            run_once, settings.idempotency_table, dynamodb, config, key_prefix=BATCH_KEY_PREFIX
        ),
        limits=RequestLimits(limits) if limits is not None else None,
        suppressions=SuppressionService(suppressions),
        test_deliveries=DynamoDbSimulatorStore(dynamodb, settings.messages_table),
    )


def _webhooks(settings: ApiSettings, dynamodb: Any, sqs: Any) -> WebhookService:
    # Loaded with the first request about webhooks: a send never needs these modules.
    from sendonce.adapters.dynamodb_webhooks import DynamoDbWebhookStore  # noqa: PLC0415
    from sendonce.adapters.sqs_webhook_queue import SqsDeliveryQueue  # noqa: PLC0415
    from sendonce.webhooks.dependencies import target_checker  # noqa: PLC0415
    from sendonce.webhooks.service import WebhookService  # noqa: PLC0415

    store = DynamoDbWebhookStore(dynamodb, settings.webhooks_table)
    return WebhookService(
        endpoints=store,
        events=store,
        queue=SqsDeliveryQueue(sqs, settings.webhook_queue_url),
        check_target=target_checker(allow_private=settings.webhook_allow_private_targets),
    )


root: Root[ApiDependencies] = Root(build)
