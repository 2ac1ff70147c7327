"""The AWS emulator: moto's server in-process, holding every table, queue, secret and bucket of the
template."""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Mapping
from typing import Any

from moto.core import responses as moto_responses
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from sendonce_cli.targets import client
from werkzeug.serving import BaseWSGIServer, make_server

from sendonce_local import moto_sqs, moto_transactions
from sendonce_local.deliveries import DeliveryLog
from sendonce_local.emulator_middleware import EmulatorMiddleware
from sendonce_local.intrinsics import Resolver
from sendonce_local.local_secrets import LocalSecrets, create_secrets
from sendonce_local.template import ResourceSpec, Template

__all__ = ["AwsEmulator", "client", "create_buckets", "provision", "queue_attributes", "table_request"]

log = logging.getLogger("local-stack.emulator")

QUEUE_ATTRIBUTES = (
    "VisibilityTimeout",
    "MessageRetentionPeriod",
    "DelaySeconds",
    "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds",
    "FifoQueue",
    "ContentBasedDeduplication",
)


class BackendByHost(DomainDispatcherApplication):
    """moto's dispatcher, working out each host's backend once.

    moto finds a request's backend from its host (inferred from the signing scope) by listing its own
    package directory and matching every backend's URL patterns, on every request, under one lock:
    about a third of what the emulator spends on a request. The answer depends on the host alone
    (the directory and the patterns are moto's installed files), so it is kept by host.
    """

    def __init__(self) -> None:
        super().__init__(create_backend_app)
        self._backend_by_host: dict[str | None, Any] = {}

    def get_backend_for_host(self, host: str | None) -> Any:
        # Called by get_application under the dispatcher's lock.
        if host not in self._backend_by_host:
            self._backend_by_host[host] = super().get_backend_for_host(host)
        return self._backend_by_host[host]


# moto lists a response class's methods (inspect.getmembers) on every request to find the action's;
# a class's methods do not change while the emulator runs, so each class is listed once.
_METHOD_NAMES = moto_responses.method_names_from_class


def install_method_names_cache() -> None:
    if not hasattr(moto_responses.method_names_from_class, "cache_info"):
        moto_responses.method_names_from_class = functools.cache(_METHOD_NAMES)


class AwsEmulator:
    def __init__(self, host: str, port: int, deliveries: DeliveryLog) -> None:
        self.host, self.port = host, port
        moto_transactions.install()
        moto_sqs.install()
        install_method_names_cache()
        self.middleware = EmulatorMiddleware(BackendByHost(), deliveries)
        self._server: BaseWSGIServer = make_server(
            host, port, self.middleware, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, name="aws-emulator", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def table_request(table: ResourceSpec) -> dict[str, Any]:
    """CreateTable arguments from an AWS::DynamoDB::Table's Properties."""
    properties = table.properties
    request: dict[str, Any] = {
        "TableName": table.logical_id,
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "KeySchema": properties["KeySchema"],
        "BillingMode": properties.get("BillingMode", "PROVISIONED"),
    }
    throughput = properties.get("ProvisionedThroughput") or {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
    for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        if properties.get(key):
            indexes = [dict(index) for index in properties[key]]
            if key == "GlobalSecondaryIndexes" and request["BillingMode"] == "PROVISIONED":
                for index in indexes:
                    index.setdefault("ProvisionedThroughput", throughput)
            request[key] = indexes
    if request["BillingMode"] == "PROVISIONED":
        request["ProvisionedThroughput"] = throughput
    stream = properties.get("StreamSpecification")
    if stream:
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    return request


def queue_attributes(queue: ResourceSpec, resolver: Resolver) -> dict[str, str]:
    """CreateQueue attributes from an AWS::SQS::Queue's Properties (the redrive target resolved)."""
    properties = queue.properties
    attributes = {name: _attribute(properties[name]) for name in QUEUE_ATTRIBUTES if name in properties}
    redrive = properties.get("RedrivePolicy")
    if redrive:
        policy = resolver.resolve(redrive)
        attributes["RedrivePolicy"] = json.dumps(
            {
                "deadLetterTargetArn": policy["deadLetterTargetArn"],
                "maxReceiveCount": int(policy["maxReceiveCount"]),
            }
        )
    return attributes


def _attribute(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def queues_in_creation_order(queues: list[ResourceSpec]) -> list[ResourceSpec]:
    """Dead-letter queues (queues without a redrive policy) first."""
    return sorted(queues, key=lambda queue: "RedrivePolicy" in queue.properties)


def create_tables(dynamodb: Any, template: Template) -> None:
    """Every AWS::DynamoDB::Table of the template, named by its logical id, TTL included."""
    for table in template.tables:
        dynamodb.create_table(**table_request(table))
        ttl = table.properties.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            dynamodb.update_time_to_live(
                TableName=table.logical_id,
                TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
            )


def create_queues(sqs: Any, template: Template, resolver: Resolver) -> dict[str, str]:
    """Every AWS::SQS::Queue of the template (dead-letter queues first); their URLs by logical id."""
    return {
        queue.logical_id: sqs.create_queue(
            QueueName=queue.logical_id, Attributes=queue_attributes(queue, resolver)
        )["QueueUrl"]
        for queue in queues_in_creation_order(template.queues)
    }


def create_buckets(s3: Any, template: Template, resolver: Resolver) -> list[str]:
    """Every AWS::S3::Bucket of the template, named as `!Ref` names it; their names.

    Only the bucket is made. Its other Properties (encryption, lifecycle, public access block,
    ownership) and the template's AWS::S3::BucketPolicy are not applied: moto enforces none of them,
    and a policy denying plain HTTP (aws:SecureTransport) would refuse the emulator's endpoint if it
    did. A presigned URL the functions make names the emulator's host:port, path-style (botocore
    addresses a bucket by path on a custom endpoint), so a client outside the stack can use it."""
    names = [resolver.bucket_name(bucket.logical_id) for bucket in template.buckets]
    for name in names:
        s3.create_bucket(Bucket=name)  # us-east-1: no CreateBucketConfiguration
    return names


def provision(
    template: Template,
    endpoint: str,
    email_from: str,
    secrets: LocalSecrets | None = None,
    parameters: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Create every table, queue, bucket and secret (its value from `secrets`, else a new random
    one), verify the sender identity; returns queue URLs by logical id. `parameters`: the values the
    local stack gives the template's parameters."""
    create_tables(client("dynamodb", endpoint), template)
    resolver = Resolver(template, endpoint, parameters)
    urls = create_queues(client("sqs", endpoint), template, resolver)
    create_buckets(client("s3", endpoint), template, resolver)
    own = secrets or LocalSecrets.generate()
    answers = {**(parameters or {}), **own.parameters()}
    create_secrets(
        client("secretsmanager", endpoint), template, Resolver(template, endpoint, answers), own.generated()
    )
    client("ses", endpoint).verify_email_identity(EmailAddress=email_from)
    client("sesv2", endpoint).create_email_identity(EmailIdentity=email_from)
    return urls
