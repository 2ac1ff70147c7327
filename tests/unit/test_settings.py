"""Settings read from the environment: each value read by its field's rule, every problem named by
its variable, defaults where the template sets nothing.

The settings are read without a validation library (no function pays for one to read a few
strings); these tests hold them to the rules the template's parameters promise.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import MISSING

import pytest
from sendonce import channels
from sendonce.settings import (
    ApiSettings,
    DispatcherSettings,
    EventsSettings,
    HandoffSettings,
    InvalidSettings,
    MessageChangesSettings,
    WebhookDeliverySettings,
)

QUEUES = {spec.queue_url_setting: f"https://queue/{spec.name}" for spec in channels.all_specs()}
API = {
    "MESSAGES_TABLE": "Messages",
    "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
    "IDEMPOTENCY_TABLE": "Idempotency",
    "API_KEYS_TABLE": "Keys",
    **QUEUES,
}
WEBHOOKS = {
    "WEBHOOKS_TABLE": "Webhooks",
    "WEBHOOK_QUEUE_URL": "https://queue/webhooks",
    "WEBHOOK_SLOW_LANE_QUEUE_URL": "https://queue/webhooks-slow-lane",
}


def test_what_the_environment_does_not_set_takes_its_default() -> None:
    settings = ApiSettings.from_environment(API)

    assert settings.messages_table == "Messages"
    assert settings.queue_urls == {spec.name: f"https://queue/{spec.name}" for spec in channels.all_specs()}
    assert settings.dedup_window_seconds == 900
    assert settings.require_idempotency_key is False
    assert settings.limits_table == ""
    assert settings.rate_limit_per_second == 50


def test_values_are_read_as_their_fields_types() -> None:
    settings = ApiSettings.from_environment(
        {
            **API,
            "SENDONCE_DEDUP_WINDOW_SECONDS": "60",
            "SENDONCE_REQUIRE_IDEMPOTENCY_KEY": "true",
            "SENDONCE_DAILY_SEND_QUOTA": "0",
        }
    )
    dispatcher = DispatcherSettings.from_environment(
        {
            "MESSAGES_TABLE": "Messages",
            "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
            "SENDONCE_PROVIDER_TIMEOUT_SECONDS": "2.5",
        }
    )

    assert settings.dedup_window_seconds == 60
    assert settings.require_idempotency_key is True
    assert settings.daily_send_quota == 0
    assert dispatcher.provider_timeout_seconds == 2.5


@pytest.mark.parametrize(("value", "read"), [("true", True), ("False", False), ("1", True), ("0", False)])
def test_a_flag_reads_true_or_false(value: str, read: bool) -> None:
    settings = ApiSettings.from_environment({**API, "SENDONCE_REQUIRE_IDEMPOTENCY_KEY": value})
    assert settings.require_idempotency_key is read


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SENDONCE_DEDUP_WINDOW_SECONDS", "0"),
        ("SENDONCE_DEDUP_WINDOW_SECONDS", "15m"),
        ("SENDONCE_RATE_LIMIT_PER_SECOND", "100001"),
        ("SENDONCE_DAILY_SEND_QUOTA", "-1"),
        ("SENDONCE_REQUIRE_IDEMPOTENCY_KEY", "maybe"),
        ("MESSAGES_TABLE", ""),
    ],
)
def test_a_value_the_function_cannot_run_with_is_refused_by_its_name(variable: str, value: str) -> None:
    with pytest.raises(InvalidSettings, match=variable):
        ApiSettings.from_environment({**API, variable: value})


@pytest.mark.parametrize("value", ["0", "-1", "61", "nan", "soon"])
def test_a_provider_timeout_is_more_than_nothing_and_at_most_a_minute(value: str) -> None:
    with pytest.raises(InvalidSettings, match="SENDONCE_PROVIDER_TIMEOUT_SECONDS"):
        DispatcherSettings.from_environment(
            {
                "MESSAGES_TABLE": "Messages",
                "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret",
                "SENDONCE_PROVIDER_TIMEOUT_SECONDS": value,
            }
        )


def test_every_problem_is_told_at_once() -> None:
    with pytest.raises(InvalidSettings) as refused:
        ApiSettings.from_environment({"SENDONCE_DEDUP_WINDOW_SECONDS": "0"})

    for variable in ("MESSAGES_TABLE", "IDEMPOTENCY_TABLE", "SENDONCE_DEDUP_WINDOW_SECONDS", "QUEUE_URL"):
        assert variable in str(refused.value)


def test_a_required_setting_must_be_set() -> None:
    without_keys = {name: value for name, value in API.items() if name != "API_KEYS_TABLE"}
    with pytest.raises(InvalidSettings, match="API_KEYS_TABLE: is required"):
        ApiSettings.from_environment(without_keys)
    assert ApiSettings.from_environment(API).api_keys_table == "Keys"


def test_the_hand_off_needs_every_channels_queue() -> None:
    assert HandoffSettings.from_environment(QUEUES).queue_urls.keys() == {"sms", "imessage", "email"}
    with pytest.raises(InvalidSettings, match="missing queue URLs"):
        HandoffSettings.from_environment({})


def test_a_webhook_retry_schedule_is_read_when_the_function_starts() -> None:
    settings = WebhookDeliverySettings.from_environment(
        {**WEBHOOKS, "SENDONCE_WEBHOOK_RETRY_SCHEDULE": "1,2"}
    )
    assert settings.retry_schedule == "1,2"
    with pytest.raises(InvalidSettings, match="SENDONCE_WEBHOOK_RETRY_SCHEDULE"):
        WebhookDeliverySettings.from_environment({**WEBHOOKS, "SENDONCE_WEBHOOK_RETRY_SCHEDULE": "5,-1"})


def test_settings_are_frozen() -> None:
    settings = DispatcherSettings.from_environment(
        {"MESSAGES_TABLE": "Messages", "SENDONCE_HASHING_KEY_ARN": "HashingKeySecret"}
    )
    with pytest.raises(AttributeError):
        settings.messages_table = "Other"  # type: ignore[misc]


def test_reading_settings_imports_no_validation_library() -> None:
    """A dispatcher validates no request body: its settings alone must not bring pydantic in."""
    script = (
        "import sys; from sendonce.settings import DispatcherSettings;"
        "DispatcherSettings.from_environment({'MESSAGES_TABLE': 'Messages'});"
        "print('pydantic' in sys.modules)"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "False"


def test_each_class_lists_the_variables_it_reads_with_their_defaults() -> None:
    api = ApiSettings.variables()
    dispatcher = DispatcherSettings.variables()

    assert api["MESSAGES_TABLE"] is MISSING
    assert api["SENDONCE_DEDUP_WINDOW_SECONDS"] == 900
    assert api["SENDONCE_REQUIRE_IDEMPOTENCY_KEY"] is False
    for spec in channels.all_specs():
        # The API and the hand-off need every channel's queue; a dispatcher serves one of them.
        assert api[spec.queue_url_setting] is MISSING
        assert HandoffSettings.variables()[spec.queue_url_setting] is MISSING
        assert dispatcher[spec.queue_url_setting] == ""
        assert dispatcher[spec.provider_setting] == spec.providers[0]


@pytest.mark.parametrize(
    "cls",
    [
        ApiSettings,
        DispatcherSettings,
        HandoffSettings,
        EventsSettings,
        MessageChangesSettings,
        WebhookDeliverySettings,
    ],
    ids=lambda cls: cls.__name__,
)
def test_what_a_class_lists_as_required_is_what_it_refuses_to_run_without(cls: type) -> None:
    with pytest.raises(InvalidSettings) as refused:
        cls.from_environment({})  # type: ignore[attr-defined]
    variables = cls.variables()  # type: ignore[attr-defined]
    problem = str(refused.value)

    for variable, default in variables.items():
        assert (variable in problem) is (default is MISSING), variable


def test_an_unset_variable_takes_the_default_the_class_lists() -> None:
    environment = {
        name: "x" for name, default in WebhookDeliverySettings.variables().items() if default is MISSING
    }
    settings = WebhookDeliverySettings.from_environment(environment)

    assert settings.retry_schedule == WebhookDeliverySettings.variables()["SENDONCE_WEBHOOK_RETRY_SCHEDULE"]
    assert (
        settings.allow_private_targets
        is WebhookDeliverySettings.variables()["SENDONCE_WEBHOOK_ALLOW_PRIVATE_TARGETS"]
    )


def test_a_webhook_endpoint_gets_the_contracts_15_seconds_whatever_the_environment() -> None:
    """Not a setting: the function's Timeout and the slow lane are built on it."""
    from sendonce.entrypoints.webhook_delivery import build  # noqa: PLC0415
    from sendonce.status_webhooks.delivery import WebhookDeliverer  # noqa: PLC0415

    settings = WebhookDeliverySettings.from_environment({**WEBHOOKS, "SENDONCE_WEBHOOK_TIMEOUT_SECONDS": "1"})
    built = build(settings, lambda service, **_: object())

    assert isinstance(built.deliverer, WebhookDeliverer)
    assert built.deliverer.timeout_seconds == 15.0
    assert "SENDONCE_WEBHOOK_TIMEOUT_SECONDS" not in WebhookDeliverySettings.variables()


def test_a_function_builds_its_own_settings_class_only() -> None:
    """Each class is in a module of its own, imported when first named: the API function never
    builds the dispatchers' class, nor they the API's."""
    script = (
        "import sys; from sendonce.settings import ApiSettings;"
        "print(sorted(m for m in sys.modules if m.startswith('sendonce.settings.')))"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "['sendonce.settings.api']"
