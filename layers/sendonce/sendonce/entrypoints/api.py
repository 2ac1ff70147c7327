"""ApiFunction: the HTTP API of sendonce (v1), and its composition root.

The routes, the preflight and the handlers are `sendonce.api`'s (`sendonce.api.app.handle`); this
module builds what they need (`sendonce.api.dependencies.ApiDependencies`) from the settings and the
clients, with the adapters the API never imports, and gives the API's root its build function.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from sendonce.adapters.dynamodb_api_keys import DynamoDbApiKeyStore
from sendonce.adapters.dynamodb_limits import DynamoDbLimits
from sendonce.adapters.dynamodb_suppressions import DynamoDbSuppressionStore
from sendonce.adapters.secrets_manager import SecretsManagerSecret
from sendonce.adapters.sqs_queue import SqsEventQueue, SqsMessageQueue
from sendonce.api import dependencies
from sendonce.api.answers import send_answer
from sendonce.api.app import handle
from sendonce.api.dependencies import ApiDependencies
from sendonce.api.idempotency import StoredAnswer, idempotency_config, make_idempotent
from sendonce.auth.key_cache import CachedApiKeyStore
from sendonce.aws_clients import Clients, client, client_on_first_use
from sendonce.composition import Root, on_first_call
from sendonce.entrypoints.shared.hashing_key import deployment_keyed_hash
from sendonce.entrypoints.shared.sending_store import charged_sending_store
from sendonce.errors import ProviderUnreachable
from sendonce.limits.model import Limits, sms_countries
from sendonce.limits.service import RequestLimits
from sendonce.messages.service import MessageService, SendCommand
from sendonce.observability import logger, metrics
from sendonce.secret_values import Secret, SecretUnavailable
from sendonce.settings import ApiSettings
from sendonce.suppressions.service import SuppressionService

if TYPE_CHECKING:  # imported when first needed (_webhooks, _test_deliveries, _send_many, _batch_once)
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from sendonce.activity.service import ActivityService
    from sendonce.api.batch import SendMany
    from sendonce.api.idempotency import SendOnce
    from sendonce.campaigns.service import CampaignService
    from sendonce.erasures.service import ErasureService
    from sendonce.messages.ports import SendingStore
    from sendonce.simulator.ports import SimulatorDeliveries
    from sendonce.status_webhooks.service import WebhookService
    from sendonce.templates.service import TemplateService

# A secret read must not hold a provider's webhook longer than its patience.
SECRET_READ_TIMEOUT_SECONDS = 3


def build(settings: ApiSettings, clients: Clients) -> ApiDependencies:
    # A send calls DynamoDB only (its hand-off follows from the table's stream): SQS, for edits,
    # provider events and webhooks, is built by its first call.
    dynamodb, sqs = clients("dynamodb"), client_on_first_use("sqs", build=clients)
    keyed_hash = deployment_keyed_hash(settings.hashing_key_arn, clients)
    store, limits = charged_sending_store(
        dynamodb,
        messages_table=settings.messages_table,
        retention_days=settings.message_retention_days,
        limits_table=settings.limits_table,
        defaults=Limits(
            settings.rate_limit_per_second,
            settings.daily_send_quota,
            sms_countries=sms_countries(settings.sms_allowed_countries),
            daily_sms_segments=settings.daily_sms_segments,
        ),
        cache_seconds=settings.limits_cache_seconds,
        keyed_hash=keyed_hash,
    )
    queue = SqsMessageQueue(sqs, settings.queue_urls)
    dedup_window = timedelta(seconds=settings.dedup_window_seconds)
    suppressions = DynamoDbSuppressionStore(dynamodb, settings.messages_table, keyed_hash)
    # The templates' use cases, built with the first request about templates or the first send from one.
    templates = on_first_call(partial(_templates, settings, dynamodb))
    messages = MessageService(
        store=store, queue=queue, dedup_window=dedup_window, limits=limits, templates=templates
    )
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
        provider_events_secret=SecretsManagerSecret(
            settings.provider_events_secret_arn,
            partial(clients, "secretsmanager", timeout_seconds=SECRET_READ_TIMEOUT_SECONDS),
        ),
        twilio_auth_token=_twilio_auth_token(settings, clients),
        # A batch's sender and its modules load with the first batch: a send never needs them.
        send_many=on_first_call(partial(_send_many, store, dedup_window, limits, suppressions, templates)),
        send_batch_once=on_first_call(partial(_batch_once, settings, dynamodb, config)),
        limits=RequestLimits(limits) if limits is not None else None,
        suppressions=SuppressionService(suppressions),
        build_test_deliveries=partial(_test_deliveries, settings, dynamodb),
        build_templates=templates,
        build_campaigns=partial(_campaigns, settings, dynamodb, clients),
        create_campaign_once=on_first_call(partial(_campaign_once, settings, dynamodb, config)),
        build_activity=partial(_activity, settings, dynamodb, messages),
        build_erasures=partial(_erasures, settings, dynamodb, sqs),
    )


def _activity(settings: ApiSettings, dynamodb: Any, messages: MessageService) -> ActivityService:
    from sendonce.activity.service import ActivityService  # noqa: PLC0415
    from sendonce.adapters.dynamodb_activity import DynamoDbPromiseCounts, DynamoDbProviderEventLog  # noqa: PLC0415
    from sendonce.adapters.dynamodb_webhooks import DynamoDbWebhookStore  # noqa: PLC0415

    return ActivityService(
        messages=messages,
        events=DynamoDbWebhookStore(dynamodb, settings.webhooks_table),
        provider_events=DynamoDbProviderEventLog(dynamodb, settings.messages_table),
        counts=DynamoDbPromiseCounts(dynamodb, settings.webhooks_table),
    )


def _erasures(settings: ApiSettings, dynamodb: Any, sqs: Any) -> ErasureService | None:
    """The erasures' use cases, loaded with the first request about erasures."""
    if not settings.erasure_queue_url:
        return None
    from sendonce.adapters.dynamodb_erasures import DynamoDbErasureStore  # noqa: PLC0415
    from sendonce.adapters.sqs_erasure_queue import SqsErasureQueue  # noqa: PLC0415
    from sendonce.erasures.service import ErasureService  # noqa: PLC0415

    store = DynamoDbErasureStore(dynamodb, settings.messages_table)
    return ErasureService(store, SqsErasureQueue(sqs, settings.erasure_queue_url))


def _twilio_auth_token(settings: ApiSettings, clients: Clients) -> Secret | None:
    """The auth token of Twilio's credentials secret, which signs its status callbacks; None when
    the settings name no such secret."""
    if not settings.twilio_credentials_arn:
        return None
    credentials = SecretsManagerSecret(
        settings.twilio_credentials_arn,
        partial(clients, "secretsmanager", timeout_seconds=SECRET_READ_TIMEOUT_SECONDS),
    )

    def auth_token() -> str:
        from sendonce.providers.twilio_provider import TwilioCredentials  # noqa: PLC0415

        try:
            return TwilioCredentials.parse(credentials()).auth_token
        except ProviderUnreachable as error:  # a secret of the wrong shape: not readable, as a 503
            raise SecretUnavailable(error.message) from None

    return auth_token


def _send_many(
    store: SendingStore,
    dedup_window: timedelta,
    limits: DynamoDbLimits | None,
    suppressions: DynamoDbSuppressionStore,
    templates: Callable[[], TemplateService],
) -> SendMany:
    from sendonce.messages.batch import BatchSender  # noqa: PLC0415

    sender = BatchSender(
        store=store, dedup_window=dedup_window, limits=limits, suppressions=suppressions, templates=templates
    )
    return sender.send_many


def _batch_once(settings: ApiSettings, dynamodb: Any, config: IdempotencyConfig) -> SendOnce:
    from sendonce.api.batch import run_once  # noqa: PLC0415
    from sendonce.api.idempotency import BATCH_KEY_PREFIX  # noqa: PLC0415

    return make_idempotent(
        run_once, settings.idempotency_table, dynamodb, config, key_prefix=BATCH_KEY_PREFIX
    )


def _campaigns(settings: ApiSettings, dynamodb: Any, clients: Clients) -> CampaignService | None:
    """The campaigns' use cases, loaded with the first request about campaigns."""
    if not settings.campaigns_bucket or not settings.campaign_queue_url:
        return None
    from sendonce.adapters.dynamodb_campaigns import DynamoDbCampaignStore  # noqa: PLC0415
    from sendonce.adapters.s3_recipients import S3RecipientFiles  # noqa: PLC0415
    from sendonce.adapters.sqs_campaign_work import SqsCampaignWork  # noqa: PLC0415
    from sendonce.campaigns.service import CampaignService  # noqa: PLC0415

    return CampaignService(
        store=DynamoDbCampaignStore(dynamodb, settings.messages_table),
        files=S3RecipientFiles(clients("s3"), settings.campaigns_bucket),
        work=SqsCampaignWork(clients("sqs"), settings.campaign_queue_url),
    )


def _campaign_once(settings: ApiSettings, dynamodb: Any, config: IdempotencyConfig) -> SendOnce:
    from sendonce.api.batch import run_once  # noqa: PLC0415
    from sendonce.api.routers.campaigns import CAMPAIGN_KEY_PREFIX  # noqa: PLC0415

    return make_idempotent(
        run_once, settings.idempotency_table, dynamodb, config, key_prefix=CAMPAIGN_KEY_PREFIX
    )


def _test_deliveries(settings: ApiSettings, dynamodb: Any) -> SimulatorDeliveries:
    # Loaded with the first GET /v1/test/deliveries: a send never needs the simulator's store.
    from sendonce.adapters.dynamodb_simulator import DynamoDbSimulatorStore  # noqa: PLC0415

    return DynamoDbSimulatorStore(dynamodb, settings.messages_table)


def _templates(settings: ApiSettings, dynamodb: Any) -> Callable[[], TemplateService]:
    """The one TemplateService of the function, for `on_first_call`: loaded with the first request
    about templates or the first send from one; a send without one never needs these modules."""
    from sendonce.adapters.dynamodb_templates import DynamoDbTemplateStore  # noqa: PLC0415
    from sendonce.adapters.forked_renderer import ForkedRenderer  # noqa: PLC0415
    from sendonce.templates.service import TemplateService  # noqa: PLC0415

    service = TemplateService(DynamoDbTemplateStore(dynamodb, settings.messages_table), ForkedRenderer())
    return lambda: service


def _webhooks(settings: ApiSettings, dynamodb: Any, sqs: Any) -> WebhookService:
    # Loaded with the first request about webhooks: a send never needs these modules.
    from sendonce.adapters.dynamodb_webhooks import DynamoDbWebhookStore  # noqa: PLC0415
    from sendonce.adapters.sqs_webhook_queue import SqsDeliveryQueue  # noqa: PLC0415
    from sendonce.entrypoints.shared.webhook_sending import target_checker  # noqa: PLC0415
    from sendonce.status_webhooks.service import WebhookService  # noqa: PLC0415

    store = DynamoDbWebhookStore(dynamodb, settings.webhooks_table)
    return WebhookService(
        endpoints=store,
        events=store,
        queue=SqsDeliveryQueue(sqs, settings.webhook_queue_url),
        check_target=target_checker(allow_private=settings.webhook_allow_private_targets),
    )


root: Root[ApiDependencies] = dependencies.root.build_with(
    lambda: build(ApiSettings.from_environment(), client)
)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, context)
