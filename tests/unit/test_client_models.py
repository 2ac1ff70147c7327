"""The Python client's models are the API's schemas, field for field: this fails when they drift.

Each model of `sendonce_client.models` is compared with its schema in the OpenAPI document the
API serves (built in process, as `GET /openapi.json` builds it): the same JSON names, the same
required ones, and the same values for every enumeration (statuses, event types, channels).
"""

from __future__ import annotations

from typing import Any, get_args

import pytest
from pydantic import BaseModel
from sendonce_client import models

from sendonce_local.api_reference import current_document

# client model -> the API's schema (with "success", which the client reads as the answer's kind)
PAIRS: dict[type[BaseModel], str] = {
    models.Message: "MessageModel",
    models.MessageError: "MessageError",
    models.BatchItemResult: "BatchItemResult",
    models.BatchItemError: "BatchItemError",
    models.WebhookEndpoint: "WebhookEndpointModel",
    models.EventData: "EventData",
    models.EventDelivery: "EventDelivery",
    models.Event: "EventModel",
    models.RateLimit: "RateLimitModel",
    models.Quota: "QuotaModel",
    models.FrequencyCap: "FrequencyCapModel",
    models.QuietHours: "QuietHoursModel",
    models.SendControls: "SendControlsModel",
    models.Usage: "UsageReport",
    models.SmsBudget: "SmsBudgetModel",
    models.Protections: "ProtectionsModel",
    models.Suppression: "SuppressionModel",
    models.Erasure: "ErasureModel",
    models.SimulatedDelivery: "SimulatedDeliveryModel",
    models.Campaign: "CampaignModel",
    models.CampaignCounts: "CampaignCounts",
    models.TimelineEntry: "TimelineEntryModel",
    models.PromiseDay: "PromiseDayModel",
}


@pytest.fixture(scope="module")
def schemas() -> dict[str, Any]:
    found: dict[str, Any] = current_document()["components"]["schemas"]
    return found


def _wire_names(model: type[BaseModel]) -> tuple[set[str], set[str]]:
    names, required = set(), set()
    for name, field in model.model_fields.items():
        wire = field.alias or name
        names.add(wire)
        if field.is_required():
            required.add(wire)
    return names, required


@pytest.mark.parametrize("model", list(PAIRS), ids=lambda model: model.__name__)
def test_a_model_has_its_schemas_fields_and_requires_what_it_requires(
    model: type[BaseModel], schemas: dict[str, Any]
) -> None:
    schema = schemas[PAIRS[model]]
    properties = set(schema["properties"]) - {"success"}
    required = set(schema.get("required", [])) - {"success"}
    names, model_required = _wire_names(model)
    assert names == properties, f"{model.__name__} vs {PAIRS[model]}"
    assert model_required == required, f"{model.__name__} vs {PAIRS[model]}"


def test_the_webhook_payload_is_an_events_type_timestamp_and_data(schemas: dict[str, Any]) -> None:
    names, _ = _wire_names(models.WebhookEvent)
    assert names == {"type", "timestamp", "data"} <= set(schemas["EventModel"]["properties"])


def _literal_values(alias: Any) -> set[str]:
    return set(get_args(alias))


@pytest.mark.parametrize(
    ("alias", "schema"),
    [(models.Status, "Status"), (models.EventType, "EventType")],
    ids=["Status", "EventType"],
)
def test_enumerations_match(alias: Any, schema: str, schemas: dict[str, Any]) -> None:
    assert _literal_values(alias) == set(schemas[schema]["enum"])


def test_channels_match(schemas: dict[str, Any]) -> None:
    channel = schemas["MessageModel"]["properties"]["channel"]
    assert _literal_values(models.Channel) == set(channel["enum"])
    assert set(schemas["CampaignModel"]["properties"]["channel"]["enum"]) == set(channel["enum"])


def test_erasure_statuses_match(schemas: dict[str, Any]) -> None:
    status = models.Erasure.model_fields["status"].annotation
    assert _literal_values(status) == set(schemas["ErasureModel"]["properties"]["status"]["enum"])


def test_campaign_statuses_match(schemas: dict[str, Any]) -> None:
    status = models.Campaign.model_fields["status"].annotation
    assert _literal_values(status) == set(schemas["CampaignModel"]["properties"]["status"]["enum"])


def test_the_send_answers_carry_what_the_client_reads(schemas: dict[str, Any]) -> None:
    assert set(schemas["SendAccepted"]["properties"]) == {"success", "status", "duplicateOnly", "message"}
    assert set(schemas["DuplicateCaught"]["properties"]) == {
        "success",
        "duplicateOnly",
        "duplicateMessage",
        "message",
    }


def test_suppression_reasons_match(schemas: dict[str, Any]) -> None:
    reason = models.Suppression.model_fields["reason"].annotation
    assert _literal_values(reason) == set(schemas["SuppressionModel"]["properties"]["reason"]["enum"])
