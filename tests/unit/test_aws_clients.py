"""A client on first use is built by its first call, once, whichever threads call it; never before.

Each test gives the clients it counts (`build=`, or a composition root's `build`): none patches a module."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sendonce import aws_clients
from sendonce.entrypoints.api import build
from sendonce.settings import ApiSettings


class Built:
    """Stands for `aws_clients.client`: counts the clients built, each answering its operations."""

    def __init__(self) -> None:
        self.built: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __call__(self, service: str, **options: Any) -> Any:
        with self._lock:
            self.built.append((service, options))
        return FakeClient(service)


class FakeClient:
    def __init__(self, service: str) -> None:
        self.service = service

    def send_message(self, **request: Any) -> dict[str, Any]:
        return {"service": self.service, **request}


@pytest.fixture
def built() -> Built:
    return Built()


def test_nothing_is_built_until_an_operation_is_called(built: Built) -> None:
    aws_clients.client_on_first_use("sqs", timeout_seconds=2, sdk_retries=False, build=built)

    assert built.built == []


def test_the_first_call_builds_the_client_with_its_options_and_later_calls_reuse_it(built: Built) -> None:
    sqs = aws_clients.client_on_first_use("sqs", timeout_seconds=2, sdk_retries=False, build=built)

    assert sqs.send_message(QueueUrl="q") == {"service": "sqs", "QueueUrl": "q"}
    assert sqs.send_message(QueueUrl="r") == {"service": "sqs", "QueueUrl": "r"}
    assert built.built == [("sqs", {"timeout_seconds": 2, "sdk_retries": False})]


def test_threads_that_call_it_first_together_build_one_client(built: Built) -> None:
    sqs = aws_clients.client_on_first_use("sqs", build=built)
    start = threading.Barrier(16)

    def call() -> None:
        start.wait()
        sqs.send_message(QueueUrl="q")

    threads = [threading.Thread(target=call) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert [service for service, _ in built.built] == ["sqs"]


def test_a_private_name_is_not_looked_up_on_the_client(built: Built) -> None:
    sqs = aws_clients.client_on_first_use("sqs", build=built)

    with pytest.raises(AttributeError):
        sqs._endpoint  # noqa: B018

    assert built.built == []


def test_the_api_functions_root_builds_its_dynamodb_client_and_leaves_sqs_to_first_use(built: Built) -> None:
    # A send calls DynamoDB only: its cold start does not pay for an SQS client.
    build(ApiSettings(**_api_settings()), built)

    assert [service for service, _ in built.built] == ["dynamodb"]


def _api_settings() -> dict[str, Any]:
    return {
        "messages_table": "MessagesTable",
        "hashing_key_arn": "HashingKeySecret",
        "idempotency_table": "IdempotencyTable",
        "api_keys_table": "ApiKeysTable",
    }


def test_an_s3_upload_url_is_signed_with_signature_version_4(monkeypatch: pytest.MonkeyPatch) -> None:
    """A presigned PUT that buckets made since 2020 take, and that signs no Content-Type."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    url = aws_clients.client("s3").generate_presigned_url(
        "put_object", Params={"Bucket": "b", "Key": "k"}, ExpiresIn=60, HttpMethod="PUT"
    )
    assert "X-Amz-Algorithm=AWS4-HMAC-SHA256" in url
    assert "X-Amz-SignedHeaders=host" in url
