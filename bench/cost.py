"""What one million sends cost on AWS (us-east-1, on-demand), from the bench's counted figures.

Included: API Gateway HTTP API, the API, hand-off and dispatcher Lambdas, DynamoDB
on-demand capacity (the suppression checks with the rest: their read, or their ConditionChecks,
each billed as a transactional write), SQS requests (the hand-off's SendMessageBatch and the event
source mapping's ReceiveMessage and DeleteMessageBatch, in full batches), the provider's one
delivery report from the events queue on (its SendMessage, the mapping's requests, the status
function, its DynamoDB units), and the message's status events (MessageChangesFunction's share of
the stream's batches and the events it writes). With status-webhook endpoints, also each event's
delivery: the tasks queued, the delivery queue's mapping, WebhookDeliveryFunction and its DynamoDB
units. Lambda reads a DynamoDB stream at no charge. Not included: what the provider charges per
message (SNS SMS, SES, the HTTP provider), how the report reaches the events queue (SES publishes
through SNS; the HTTP provider's webhook is one more API request), CloudWatch Logs, data transfer,
storage. Those are listed apart in docs/performance.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# List prices, us-east-1, as stated in the bench's brief (issue 5) and recorded on this date; not
# re-checked against the live pricing pages. DynamoDB's are after the November 2024 price cut.
PRICES_READ_ON = "2026-11-30"
DYNAMODB_USD_PER_MILLION_WRU = 0.625
DYNAMODB_USD_PER_MILLION_RRU = 0.125
SQS_USD_PER_MILLION_REQUESTS = 0.40  # standard queues; each 64 KB chunk of a payload is a request
SQS_CHUNK_BYTES = 64 * 1024
LAMBDA_USD_PER_MILLION_REQUESTS = 0.20
LAMBDA_USD_PER_GB_SECOND = 0.0000166667  # x86_64
API_GATEWAY_HTTP_USD_PER_MILLION = 1.00  # HTTP API, first 300 million a month, per 512 KB
# Charged by the provider per message, apart from the infrastructure cost above.
SES_USD_PER_THOUSAND_EMAILS = 0.10
SQS_BATCH_SIZE = 10  # the template's BatchSize; at 10,000 sends a second the batches are full
STREAM_BATCH_SIZE = 100  # MessageChangesFunction's BatchSize on the stream; full at such a rate

MILLION = 1_000_000


@dataclass(frozen=True)
class LambdaUse:
    memory_mb: int
    milliseconds: float  # billed per started millisecond
    invocations_per_send: float = 1.0

    @classmethod
    def in_batches(cls, memory_mb: int, ms_per_item: float, batch_size: int) -> LambdaUse:
        """A function that takes its event's records one after another: an invocation of a full
        batch lasts `batch_size` items (an upper bound: the invocation's own overhead is counted
        once per item), and a send pays its share of one."""
        return cls(memory_mb, ms_per_item * batch_size, 1 / batch_size)

    @classmethod
    def stream_share(cls, memory_mb: int, ms_per_record: float, records_per_send: float) -> LambdaUse:
        """A function on the stream (MessageChangesFunction): a full batch of STREAM_BATCH_SIZE
        records lasts that many records' time (an upper bound: its records' chains run side by
        side), and a send pays for its own records' share of one."""
        return cls(memory_mb, ms_per_record * STREAM_BATCH_SIZE, records_per_send / STREAM_BATCH_SIZE)

    def times(self, count: float) -> LambdaUse:
        """The same use, `count` times a send."""
        return LambdaUse(self.memory_mb, self.milliseconds, self.invocations_per_send * count)

    def usd_per_send(self) -> float:
        gb_seconds = self.memory_mb / 1024 * math.ceil(self.milliseconds) / 1000
        return self.invocations_per_send * (
            LAMBDA_USD_PER_MILLION_REQUESTS / MILLION + gb_seconds * LAMBDA_USD_PER_GB_SECOND
        )


@dataclass(frozen=True)
class SendCost:
    """Per send: the API path (its API key check cached: no call), the hand-off and one dispatch."""

    wru: float
    rru: float
    sqs_message_bytes: int
    api: LambdaUse
    dispatcher: LambdaUse  # `in_batches` of the queue's batch size
    # HandoffFunction: milliseconds per stream batch; invocations_per_send = 1 / records per batch.
    handoff: LambdaUse = LambdaUse(128, 0.0, 0.0)
    # StatusFunction applying the provider's delivery report: `in_batches` of the queue's batch size.
    status: LambdaUse = LambdaUse(128, 0.0, 0.0)
    # MessageChangesFunction telling the message's stream records: `stream_share`.
    changes: LambdaUse = LambdaUse(128, 0.0, 0.0)
    # WebhookDeliveryFunction, one record a delivery: `in_batches` of its queue's batch size, times
    # the deliveries of a send.
    deliveries: LambdaUse = LambdaUse(128, 0.0, 0.0)
    # The delivery queue's requests a send (`delivery_queue_requests`); none without endpoints.
    webhook_sqs_requests: float = 0.0

    def lines(self) -> dict[str, float]:
        """USD per million sends, by item."""
        chunks = max(1, math.ceil(self.sqs_message_bytes / SQS_CHUNK_BYTES))
        # SendMessageBatch of 10 from the hand-off; Receive and DeleteBatch per batch of the mapping.
        sqs_requests = chunks / SQS_BATCH_SIZE + 2 / SQS_BATCH_SIZE
        if self.status.invocations_per_send:
            # The report's own SendMessage to the events queue; Receive and DeleteBatch per batch.
            sqs_requests += 1 + 2 / SQS_BATCH_SIZE
        sqs_requests += self.webhook_sqs_requests
        return {
            "api_gateway": API_GATEWAY_HTTP_USD_PER_MILLION,
            "lambda_api": self.api.usd_per_send() * MILLION,
            "lambda_dispatcher": self.dispatcher.usd_per_send() * MILLION,
            "lambda_handoff": self.handoff.usd_per_send() * MILLION,
            "lambda_status": self.status.usd_per_send() * MILLION,
            "lambda_message_changes": self.changes.usd_per_send() * MILLION,
            "lambda_webhook_delivery": self.deliveries.usd_per_send() * MILLION,
            "dynamodb_writes": self.wru * DYNAMODB_USD_PER_MILLION_WRU,
            "dynamodb_reads": self.rru * DYNAMODB_USD_PER_MILLION_RRU,
            "sqs": sqs_requests * SQS_USD_PER_MILLION_REQUESTS,
        }

    def usd_per_million(self) -> float:
        return sum(self.lines().values())


def delivery_queue_requests(queue_calls: float, deliveries: float) -> float:
    """The delivery queue's SQS requests a send: the changes function's calls queueing the tasks, and
    the event source mapping's ReceiveMessage and DeleteMessageBatch, a share of a full batch each
    delivery."""
    return queue_calls + deliveries * 2 / SQS_BATCH_SIZE
