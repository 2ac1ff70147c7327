"""`sendonce run`: the whole local stack, started in an order that makes health mean ready."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping

from sendonce_cli.api_keys import store_api_key
from sendonce_cli.targets import HOST

from sendonce_local.api_gateway import ApiServer, HttpApi
from sendonce_local.api_keys import parse_local_api_keys
from sendonce_local.changes import Changes
from sendonce_local.delayed_tasks import DelayedTasks
from sendonce_local.deliveries import Delivery, DeliveryListener, DeliveryLog
from sendonce_local.delivery_reporter import SWITCH, DeliveryReporter, ReportLog, reporting_enabled
from sendonce_local.emulator import AwsEmulator, client, provision
from sendonce_local.environment import Ports, apply_environment, function_environment, sandbox_parameters
from sendonce_local.event_sources import SqsPoller, concurrency_of
from sendonce_local.faults import PROVIDERS, FaultBoard
from sendonce_local.intrinsics import Resolver
from sendonce_local.lambda_runtime import FunctionRegistry
from sendonce_local.local_secrets import WEBHOOK_SECRET_SETTING, LocalSecrets
from sendonce_local.parameters import OVERRIDES_SETTING
from sendonce_local.sandbox import HttpProvider, HttpProviderServer, SandboxServer
from sendonce_local.schedules import ScheduleRunner
from sendonce_local.stream_sources import StreamPoller
from sendonce_local.template import Template, default_template_path
from sendonce_local.twilio_sandbox import TwilioProvider, TwilioServer

log = logging.getLogger("local-stack.local")

STOP_JOIN_SECONDS = 3.0
EVENTS_QUEUE = "EventsQueue"  # where SES notifications arrive through SNS


class LocalStack:
    def __init__(self, template: Template, ports: Ports, parameters: Mapping[str, str] | None = None) -> None:
        """`parameters`: the values the local stack gives the template's parameters
        (`sendonce_local.parameters.local_parameters`); the others take their Default."""
        self.template = template
        self.ports = ports
        # The sandbox's provider URLs unless told otherwise (`sendonce run` gives them already).
        own = {
            name: value for name, value in sandbox_parameters(ports).items() if name in template.parameters
        }
        self.parameters = {**own, **(parameters or {})}
        self.deliveries = DeliveryLog()
        self.reports = ReportLog()
        self.queue_urls: dict[str, str] = {}
        self.concurrency: dict[str, int] = {}  # invocations at once, by the queue an event source reads
        self.workspaces: list[str] = []
        # Created in the emulator at start; the functions read them there, the sandbox uses them.
        self.secrets = LocalSecrets.generate()
        self._stop = threading.Event()
        self._emulator: AwsEmulator | None = None
        self._sandbox: SandboxServer | None = None
        self._http_provider: HttpProviderServer | None = None
        self._twilio: TwilioServer | None = None
        self._api: ApiServer | None = None
        self._pollers: list[SqsPoller] = []
        self._stream_pollers: list[StreamPoller] = []
        self._schedules: list[ScheduleRunner] = []
        self._report_tasks: DelayedTasks | None = None

    def start(self) -> None:
        apply_environment(function_environment(self.template, self.ports, parameters=self.parameters))
        self._emulator = AwsEmulator(HOST, self.ports.aws, self.deliveries)
        self._emulator.start()
        self.queue_urls = provision(
            self.template,
            self.ports.aws_endpoint,
            os.environ["SENDONCE_EMAIL_FROM"],
            self.secrets,
            self.parameters,
        )
        self._store_api_keys()
        reporter = self._start_delivery_reports()
        faults = FaultBoard()
        # A refused provider's calls never arrive: its faults are counted on the failover, when
        # another provider (SES and SNS included) receives the message (`faults`).
        self.deliveries.add_listener(_emulated_receipts(faults))
        provider = HttpProvider(self.deliveries, lambda: self.secrets.http_provider_token, faults)
        twilio = TwilioProvider(
            self.deliveries,
            faults,
            lambda: self.secrets.twilio,
            on_accepted=reporter.report_twilio if reporter is not None else None,
        )
        self._http_provider = HttpProviderServer(HOST, self.ports.http_provider, provider)
        self._twilio = TwilioServer(HOST, self.ports.twilio, twilio)
        self._http_provider.start()
        self._twilio.start()
        faults.attach("http", self._http_provider)
        faults.attach("twilio", self._twilio)
        self._sandbox = SandboxServer(
            HOST,
            self.ports.sandbox,
            self.deliveries,
            provider,
            self.reports,
            opt_out=(lambda to: reporter.report_opt_out(to).event_id) if reporter is not None else None,
        )
        self._sandbox.start()
        functions = FunctionRegistry(self.template.functions)
        functions.load_all()
        self._start_event_sources(functions)
        # Last: the API answers (health included) only once everything above is up.
        self._api = ApiServer(HOST, self.ports.api, HttpApi(self.template.routes, functions))
        self._api.start()

    def _start_delivery_reports(self) -> DeliveryReporter | None:
        """The sandbox reports deliveries as real providers do (signed webhooks, SES through SNS)."""
        if not reporting_enabled(os.environ.get(SWITCH)):
            log.info("%s is off: the sandbox reports no delivery events", SWITCH)
            return None
        sqs = client("sqs", self.ports.aws_endpoint)
        events_queue = self.queue_urls.get(EVENTS_QUEUE, "")

        def send_to_events_queue(body: str) -> None:
            if not events_queue:
                raise LookupError(f"the template has no {EVENTS_QUEUE}")
            sqs.send_message(QueueUrl=events_queue, MessageBody=body)

        self._report_tasks = DelayedTasks("sandbox-delivery-reports")
        reporter = DeliveryReporter(
            self._report_tasks,
            self.reports,
            webhook_url=f"{self.ports.api_url}/v1/webhooks/http",
            webhook_secret=lambda: self.secrets.webhook_secret,
            send_to_events_queue=send_to_events_queue,
            email_source=os.environ["SENDONCE_EMAIL_FROM"],
            twilio_auth_token=lambda: self.secrets.twilio.auth_token,
        )
        self.deliveries.add_listener(reporter)
        self._report_tasks.start()
        return reporter

    def _store_api_keys(self) -> None:
        dynamodb = client("dynamodb", self.ports.aws_endpoint)
        table = _api_keys_table(self.template)
        for workspace, key in parse_local_api_keys(os.environ.get("SENDONCE_LOCAL_API_KEYS")):
            store_api_key(dynamodb, table, workspace, key)
            self.workspaces.append(workspace)

    def _start_event_sources(self, functions: FunctionRegistry) -> None:
        sqs = client("sqs", self.ports.aws_endpoint)
        resolver = Resolver(self.template, self.ports.aws_endpoint, self.parameters)
        for mapping in self.template.sqs_mappings:
            if mapping.enabled:
                url = self.queue_urls[mapping.queue_id]
                function = functions[mapping.function_id]
                workers = concurrency_of(mapping, resolver, function.max_environments)
                self._pollers.append(SqsPoller(mapping, function, sqs, url, self._stop, workers=workers))
                self.concurrency[mapping.queue_id] = workers
        dynamodb = client("dynamodb", self.ports.aws_endpoint)
        streams = client("dynamodbstreams", self.ports.aws_endpoint)
        for stream_mapping in self.template.stream_mappings:
            if stream_mapping.enabled:
                function = functions[stream_mapping.function_id]
                self._stream_pollers.append(
                    StreamPoller(
                        stream_mapping,
                        function,
                        dynamodb,
                        streams,
                        self._stop,
                        table_writes=self._table_writes(),
                    )
                )
        for schedule in self.template.schedules:
            if schedule.enabled:
                self._schedules.append(ScheduleRunner(schedule, functions[schedule.function_id], self._stop))
        for poller in self._pollers:
            poller.start()
        for stream_poller in self._stream_pollers:
            stream_poller.start()  # takes each shard's starting position now (TRIM_HORIZON: all of it)
        for schedule_runner in self._schedules:
            schedule_runner.start()

    def _table_writes(self) -> Changes | None:
        return self._emulator.middleware.table_writes if self._emulator is not None else None

    def wait(self) -> None:
        self._stop.wait()

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._emulator is not None:
            # The pollers waiting for a message or a write see the stop now, not at their wait's end.
            self._emulator.middleware.release_waits()
        if self._report_tasks is not None:
            self._report_tasks.stop()
        for server in (self._api, self._sandbox, self._http_provider, self._twilio):
            if server is not None:
                server.stop()
        # One wait for them all: a busy stack has dozens of threads in invocations that may run for
        # their whole timeout, and waiting for each in turn took a minute. Their threads are
        # daemons, and so are the execution environments' processes: the exit ends what is left.
        deadline = time.monotonic() + STOP_JOIN_SECONDS
        joins: list[Callable[[float], None]] = [poller.join for poller in self._pollers]
        joins += [stream_poller.join for stream_poller in self._stream_pollers]
        joins += [schedule_runner.join for schedule_runner in self._schedules]
        for join in joins:
            join(max(0.0, deadline - time.monotonic()))
        if self._emulator is not None:
            self._emulator.stop()

    def _delivery_events_state(self) -> str:
        if self._report_tasks is None:
            return f"off ({SWITCH}=false): messages stay 'sent'"
        return (
            "on: signed 'delivered' webhooks (HTTP provider), Twilio status callbacks and SES"
            " notifications via the EventsQueue, "
            f"some repeated or out of order ({SWITCH}=false turns them off)"
        )

    def banner(self) -> str:
        key = parse_local_api_keys(os.environ.get("SENDONCE_LOCAL_API_KEYS"))
        example_key = key[0][1] if key else "<api key>"
        lines = [
            "",
            "sendonce local stack is ready",
            f"  HTTP API           {self.ports.api_url}   (health: {self.ports.api_url}/v1/health)",
            f"  AWS emulator       {self.ports.aws_endpoint}   (region us-east-1, account 123456789012)",
            f"  provider sandbox   {self.ports.sandbox_url}   (/deliveries, PUT /faults, /events)",
            f"  HTTP provider      {self.ports.http_provider_url}   (POST /messages; the sandbox's too)",
            f"  Twilio (sandbox)   {self.ports.twilio_url}   (account {self.secrets.twilio.account_sid})",
            f"  delivery events    {self._delivery_events_state()}",
            f"  webhook secret     {self.secrets.webhook_secret}",
            "                     (signs POST /v1/webhooks/http; random per start unless"
            f" {WEBHOOK_SECRET_SETTING} is set)",
            f"  secrets            {', '.join(secret.logical_id for secret in self.template.secrets)}"
            " (in the emulator: the functions read them at run time)",
            f"  tables             {', '.join(table.logical_id for table in self.template.tables)}",
            f"  queues             {', '.join(self._queue_names())}",
            f"  buckets            {', '.join(self._bucket_names()) or '(none)'}",
            f"  parameters         {self._parameter_values()}",
            f"  functions          {', '.join(self.template.functions)}",
            f"  API key workspaces {', '.join(self.workspaces) or '(none)'}",
            "",
            "Try:",
            f"  curl -s -X POST {self.ports.api_url}/v1/messages -H 'Authorization: Bearer {example_key}'"
            " -H 'Content-Type: application/json'"
            ' -d \'{"channel":"sms","to":"+15550100000","body":"Hello from sendonce"}\'',
            f"  curl -s {self.ports.sandbox_url}/deliveries",
            f"  aws --endpoint-url {self.ports.aws_endpoint} dynamodb scan --table-name MessagesTable",
            "",
            "Ctrl-C stops it.",
        ]
        return "\n".join(lines)

    def _queue_names(self) -> list[str]:
        """Each queue, with how many invocations its event source runs at once."""
        return [
            f"{name} ({self.concurrency[name]} at a time)" if name in self.concurrency else name
            for name in self.queue_urls
        ]

    def _bucket_names(self) -> list[str]:
        resolver = Resolver(self.template, self.ports.aws_endpoint, self.parameters)
        return [resolver.bucket_name(bucket.logical_id) for bucket in self.template.buckets]

    def _parameter_values(self) -> str:
        given = ", ".join(f"{name}={value}" for name, value in sorted(self.parameters.items()))
        return (
            f"{given or '(none)'}; the others their Default"
            f" (--parameter-overrides Name=Value ..., or {OVERRIDES_SETTING})"
        )


def _emulated_receipts(faults: FaultBoard) -> DeliveryListener:
    """What the emulated SES and SNS accepted counts for other providers' `refused` faults (the
    sandbox's own providers count every call they receive themselves)."""

    def listener(delivery: Delivery) -> None:
        provider = delivery.get("provider")
        if provider not in PROVIDERS:
            faults.received(str(provider), delivery.get("channel"), delivery.get("to"))

    return listener


def _api_keys_table(template: Template) -> str:
    names = [table.logical_id for table in template.tables]
    if "ApiKeysTable" in names:
        return "ApiKeysTable"
    raise ValueError(f"the template has no ApiKeysTable (tables: {', '.join(names)})")


__all__ = ["LocalStack", "default_template_path"]
