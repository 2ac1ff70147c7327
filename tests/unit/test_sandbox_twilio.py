"""sendonce_local: the provider sandbox plays Twilio too, and its faults name a provider.

- Twilio's Messages API on its own port: basic auth with the local credentials, create (201, an
  "SM" sid, our message id read from the StatusCallback URL), list (filtered by To and DateSent,
  newest first); status callbacks signed with X-Twilio-Signature as Twilio signs them.
- `PUT /faults` takes `provider` (http by default) and the modes refused, error_403,
  timeout_unaccepted, error_500, error_400 and timeout; `refused` closes that provider's listening
  socket until the message it refused reaches another provider (or DELETE /faults).
- The local stack points the dispatchers at the sandbox's providers and gives Twilio's secret its
  own credentials.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from sendonce_local.delayed_tasks import DelayedTasks
from sendonce_local.deliveries import DeliveryLog
from sendonce_local.delivery_reporter import DeliveryReporter, ReportLog
from sendonce_local.environment import Ports, function_environment
from sendonce_local.faults import FaultBoard
from sendonce_local.http_server import Answer
from sendonce_local.local_secrets import TWILIO_CREDENTIALS_SECRET, LocalSecrets, create_secrets
from sendonce_local.parameters import check, local_parameters
from sendonce_local.sandbox import HttpProvider, HttpProviderServer, SandboxServer
from sendonce_local.template import Template, load_template
from sendonce_local.twilio_sandbox import TwilioCredentials, TwilioMessage, TwilioProvider, TwilioServer
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
CREDENTIALS = TwilioCredentials("AC" + "0" * 32, "auth-token-for-tests")
GOOD_AUTH = (
    "Basic " + base64.b64encode(f"{CREDENTIALS.account_sid}:{CREDENTIALS.auth_token}".encode()).decode()
)
SID = CREDENTIALS.account_sid
CALLBACK = "http://127.0.0.1:3000/v1/webhooks/twilio?messageId=msg_1"
BEARER = "Bearer t0k"


def form(
    to: str = "+15550100001", body: str = "hi", callback: str = CALLBACK, **more: str
) -> dict[str, list[str]]:
    values = {"To": to, "Body": body, "From": "+15005550006", "StatusCallback": callback, **more}
    return {name: [value] for name, value in values.items() if value}


def http_body(message_id: str = "m1", to: str = "+15550100001", channel: str = "sms") -> bytes:
    return json.dumps({"messageId": message_id, "channel": channel, "to": to, "body": "hi"}).encode()


@pytest.fixture
def log() -> DeliveryLog:
    return DeliveryLog()


@pytest.fixture
def board() -> FaultBoard:
    return FaultBoard()


@pytest.fixture
def twilio(log: DeliveryLog, board: FaultBoard) -> TwilioProvider:
    return TwilioProvider(log, board, lambda: CREDENTIALS)


@pytest.fixture
def http(log: DeliveryLog, board: FaultBoard) -> HttpProvider:
    return HttpProvider(log, lambda: "t0k", board)


# ---------------------------------------------------------------------------- Twilio's API
def test_a_create_is_accepted_recorded_and_listed(twilio: TwilioProvider, log: DeliveryLog) -> None:
    answer = twilio.create(GOOD_AUTH, SID, form())

    assert answer.status == 201
    message = answer.body
    assert message["sid"].startswith("SM")
    assert len(message["sid"]) == 34
    int(message["sid"][2:], 16)
    assert (message["status"], message["to"], message["from"], message["body"]) == (
        "queued",
        "+15550100001",
        "+15005550006",
        "hi",
    )
    assert message["account_sid"] == SID
    assert message["date_created"].endswith("+0000")  # RFC 2822, as Twilio writes dates
    assert [(d["provider"], d["messageId"], d["channel"], d["to"]) for d in log.all()] == [
        ("twilio", "msg_1", "sms", "+15550100001")
    ]
    listed = twilio.list(GOOD_AUTH, SID, {"To": ["+15550100001"], "PageSize": ["50"]})
    assert listed.status == 200
    assert [m["sid"] for m in listed.body["messages"]] == [message["sid"]]
    assert listed.body["next_page_uri"] is None
    assert (listed.body["page"], listed.body["page_size"]) == (0, 50)


def test_without_a_status_callback_the_delivery_has_no_message_id(
    twilio: TwilioProvider, log: DeliveryLog
) -> None:
    assert twilio.create(GOOD_AUTH, SID, form(callback="")).status == 201
    assert log.all()[0]["messageId"] is None


def test_the_list_is_filtered_by_recipient_and_date_newest_first(twilio: TwilioProvider) -> None:
    first = twilio.create(GOOD_AUTH, SID, form(body="one")).body["sid"]
    second = twilio.create(GOOD_AUTH, SID, form(body="two")).body["sid"]
    twilio.create(GOOD_AUTH, SID, form(to="+15550100002", body="other"))
    now = datetime.now(UTC)

    def sids(**query: str) -> list[str]:
        answer = twilio.list(GOOD_AUTH, SID, {name: [value] for name, value in query.items()})
        assert answer.status == 200, answer.body
        return [m["sid"] for m in answer.body["messages"]]

    assert sids(To="+15550100001") == [second, first]
    after = (now - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert sids(To="+15550100001", **{"DateSent>": after}) == [second, first]
    later = (now + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert sids(To="+15550100001", **{"DateSent>": later}) == []
    assert sids(To="+15550100001", **{"DateSent<": after}) == []
    assert sids(To="+15550100001", DateSent=now.strftime("%Y-%m-%d")) == [second, first]
    assert twilio.list(GOOD_AUTH, SID, {"DateSent>": ["yesterday"]}).status == 400
    page = twilio.list(GOOD_AUTH, SID, {"To": ["+15550100001"], "PageSize": ["1"]})
    assert [m["sid"] for m in page.body["messages"]] == [second]
    assert page.body["next_page_uri"] is not None


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer x",
        "Basic " + base64.b64encode(f"{SID}:wrong".encode()).decode(),
        "Basic " + base64.b64encode(b"ACother:auth-token-for-tests").decode(),
        "Basic !!!",
    ],
)
def test_wrong_credentials_are_refused_with_twilio_s_error(
    twilio: TwilioProvider, log: DeliveryLog, authorization: str | None
) -> None:
    for answer in (twilio.create(authorization, SID, form()), twilio.list(authorization, SID, {})):
        assert answer.status == 401
        assert answer.body["code"] == 20003
        assert answer.body["status"] == 401
        assert set(answer.body) == {"code", "message", "more_info", "status"}
    assert log.all() == []


def test_another_account_s_path_or_bad_parameters_are_refused(twilio: TwilioProvider) -> None:
    assert twilio.create(GOOD_AUTH, "ACsomeoneelse", form()).body["code"] == 20404
    assert twilio.create(GOOD_AUTH, SID, form(to="")).body["code"] == 21604
    assert twilio.create(GOOD_AUTH, SID, form(body="")).body["code"] == 21602
    assert twilio.create(GOOD_AUTH, SID, form(to="not-a-number")).body["code"] == 21211
    no_sender = {"To": ["+15550100001"], "Body": ["hi"]}
    assert twilio.create(GOOD_AUTH, SID, no_sender).body["code"] == 21603
    service = {**no_sender, "MessagingServiceSid": ["MG" + "1" * 32]}
    assert twilio.create(GOOD_AUTH, SID, service).body["status"] == "accepted"


def test_the_server_speaks_twilio_s_paths_and_forms(twilio: TwilioProvider) -> None:
    server = TwilioServer("127.0.0.1", free_port(), twilio)
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}/2010-04-01/Accounts/{SID}"
        data = urllib.parse.urlencode({"To": "+15550100001", "Body": "hi", "From": "+15005550006"}).encode()
        request = urllib.request.Request(
            f"{base}/Messages.json", data=data, headers={"Authorization": GOOD_AUTH}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert answer.status == 201
            assert answer.headers["Connection"] == "close"  # a closed port must refuse the next call
            sid = json.loads(answer.read())["sid"]
        query = urllib.parse.urlencode({"To": "+15550100001", "PageSize": 50, "DateSent>": "2020-01-01"})
        listed = urllib.request.Request(f"{base}/Messages.json?{query}", headers={"Authorization": GOOD_AUTH})
        with urllib.request.urlopen(listed, timeout=5) as answer:
            assert [m["sid"] for m in json.loads(answer.read())["messages"]] == [sid]
        one = urllib.request.Request(f"{base}/Messages/{sid}.json", headers={"Authorization": GOOD_AUTH})
        with urllib.request.urlopen(one, timeout=5) as answer:
            assert json.loads(answer.read())["sid"] == sid
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/Messages.json", timeout=5)
        assert refused.value.code == 401
        assert json.loads(refused.value.read())["code"] == 20003
    finally:
        server.stop()


# ---------------------------------------------------------------------------- status callbacks
class Capture(BaseHTTPRequestHandler):
    received: list[tuple[str, dict[str, str], bytes]]

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.received.append((self.path, dict(self.headers), raw))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, dict[str, str], bytes]]]]:
    received: list[tuple[str, dict[str, str], bytes]] = []
    server = HTTPServer(("127.0.0.1", 0), type("Bound", (Capture,), {"received": received}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _expected_signature(token: str, url: str, params: dict[str, str]) -> str:
    """Twilio's algorithm, written again here: the URL, then each name and value sorted by name."""
    text = url + "".join(f"{name}{params[name]}" for name in sorted(params))
    return base64.b64encode(hmac.new(token.encode(), text.encode(), hashlib.sha1).digest()).decode()


def test_status_callbacks_are_signed_as_twilio_signs_them(
    log: DeliveryLog, board: FaultBoard, receiver: tuple[str, list[tuple[str, dict[str, str], bytes]]]
) -> None:
    base, received = receiver
    clock = FakeClock()
    tasks = DelayedTasks("test", clock=clock)
    journal = ReportLog()
    reporter = DeliveryReporter(
        tasks,
        journal,
        webhook_url="http://unused.invalid",
        webhook_secret=lambda: "unused",
        send_to_events_queue=lambda body: None,
        email_source="x@example.com",
        twilio_auth_token=lambda: CREDENTIALS.auth_token,
    )
    log.add_listener(reporter)  # as the stack does: it passes Twilio's deliveries by
    twilio = TwilioProvider(log, board, lambda: CREDENTIALS, on_accepted=reporter.report_twilio)
    callback = f"{base}/v1/webhooks/twilio?messageId=msg_7"

    sid = twilio.create(GOOD_AUTH, SID, form(callback=callback)).body["sid"]
    clock.now = 5.0
    tasks.run_due()

    statuses = []
    for path, headers, raw in received:
        assert path == "/v1/webhooks/twilio?messageId=msg_7"
        assert headers["Content-Type"] == "application/x-www-form-urlencoded"
        params = dict(urllib.parse.parse_qsl(raw.decode(), keep_blank_values=True))
        assert headers["X-Twilio-Signature"] == _expected_signature(CREDENTIALS.auth_token, callback, params)
        assert (params["MessageSid"], params["AccountSid"], params["To"]) == (sid, SID, "+15550100001")
        assert (params["From"], params["ApiVersion"]) == ("+15005550006", "2010-04-01")
        statuses.append(params["MessageStatus"])
    # The first message of a cadence: its `sent` comes late, after `delivered` (as Twilio's may).
    assert sorted(set(statuses)) == ["delivered", "sent"]
    assert [(e["provider"], e["messageId"], e["answer"]) for e in journal.all()] == [
        ("twilio", "msg_7", 200)
    ] * len(received)


def test_no_callback_is_planned_without_a_status_callback_url(log: DeliveryLog, board: FaultBoard) -> None:
    planned: list[TwilioMessage] = []
    twilio = TwilioProvider(log, board, lambda: CREDENTIALS, on_accepted=planned.append)
    twilio.create(GOOD_AUTH, SID, form(callback=""))
    tasks = DelayedTasks("test")
    reporter = DeliveryReporter(
        tasks,
        ReportLog(),
        webhook_url="http://unused.invalid",
        webhook_secret=lambda: "unused",
        send_to_events_queue=lambda body: None,
        email_source="x@example.com",
        twilio_auth_token=lambda: "t",
    )
    reporter.report_twilio(planned[0])
    assert tasks.pending() == 0


# ---------------------------------------------------------------------------- faults
def _call(provider: str, http: HttpProvider, twilio: TwilioProvider, key: str = "m1") -> Answer:
    if provider == "http":
        return http.send(BEARER, key, http_body(key))
    return twilio.create(GOOD_AUTH, SID, form())


@pytest.mark.parametrize("provider", ["http", "twilio"])
@pytest.mark.parametrize(
    ("mode", "status", "code", "recorded"),
    [
        ("error_400", 400, 21211, False),
        ("error_403", 403, 20403, False),
        ("error_500", 500, 20500, False),
        ("timeout", 201, None, True),
        ("timeout_unaccepted", None, None, False),
    ],
)
def test_each_fault_mode_of_each_provider(
    provider: str,
    mode: str,
    status: int | None,
    code: int | None,
    recorded: bool,
    http: HttpProvider,
    twilio: TwilioProvider,
    board: FaultBoard,
    log: DeliveryLog,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SENDONCE_PROVIDER_TIMEOUT_SECONDS", "2")
    board.arm({"provider": provider, "channel": "sms", "to": "+15550100001", "mode": mode})

    answer = _call(provider, http, twilio)

    late = mode.startswith("timeout")
    assert answer.delay_seconds == (3 if late else 0)  # past the dispatcher's provider timeout
    assert answer.hang is (mode == "timeout_unaccepted")  # no answer ever comes
    if status is not None:
        assert answer.status == status
    if code is not None and provider == "twilio":
        assert answer.body["code"] == code
        assert answer.body["status"] == status
    assert [d["provider"] for d in log.all()] == ([provider] if recorded else [])
    assert board.faults() == []  # used up by that one call
    again = _call(provider, http, twilio, key="m2")
    assert (again.status, again.delay_seconds) == (201, 0)


def test_a_timeout_unaccepted_leaves_nothing_to_find(
    twilio: TwilioProvider, http: HttpProvider, board: FaultBoard, log: DeliveryLog
) -> None:
    board.arm({"provider": "twilio", "mode": "timeout_unaccepted"})
    board.arm({"provider": "http", "channel": "sms", "mode": "timeout_unaccepted"})

    twilio.create(GOOD_AUTH, SID, form())
    http.send(BEARER, "m1", http_body("m1"))

    assert twilio.list(GOOD_AUTH, SID, {"To": ["+15550100001"]}).body["messages"] == []
    assert http.send(BEARER, "m1", http_body("m1")).status == 201  # the key was never remembered
    assert [d["provider"] for d in log.all()] == ["http"]


def test_faults_name_their_provider_and_are_checked(board: FaultBoard) -> None:
    assert board.arm({"channel": "imessage", "mode": "error_500"}).provider == "http"
    assert board.arm({"provider": "twilio", "mode": "error_403", "count": 2}).channel == "sms"
    assert board.faults() == [
        {"provider": "http", "channel": "imessage", "to": None, "mode": "error_500", "count": 1},
        {"provider": "twilio", "channel": "sms", "to": None, "mode": "error_403", "count": 2},
    ]
    for bad, reason in [
        ({"provider": "carrier-pigeon", "channel": "sms", "mode": "refused"}, "provider"),
        ({"provider": "twilio", "channel": "email", "mode": "refused"}, "sms only"),
        ({"provider": "http", "mode": "refused"}, "channel"),
        ({"provider": "http", "channel": "sms", "mode": "explode"}, "mode"),
        ({"provider": "http", "channel": "sms", "mode": "refused", "count": 0}, "count"),
    ]:
        with pytest.raises(ValueError, match=reason):
            board.arm(bad)


def test_a_fault_for_one_provider_leaves_the_other_alone(
    http: HttpProvider, twilio: TwilioProvider, board: FaultBoard
) -> None:
    board.arm({"provider": "twilio", "mode": "error_500"})

    assert http.send(BEARER, "m1", http_body("m1")).status == 201
    assert twilio.create(GOOD_AUTH, SID, form()).status == 500


# ---------------------------------------------------------------------------- refused
def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.fixture
def servers(
    http: HttpProvider, twilio: TwilioProvider, board: FaultBoard, log: DeliveryLog
) -> Iterator[tuple[HttpProviderServer, TwilioServer, SandboxServer]]:
    http_server = HttpProviderServer("127.0.0.1", free_port(), http)
    twilio_server = TwilioServer("127.0.0.1", free_port(), twilio)
    control = SandboxServer("127.0.0.1", free_port(), log, http)
    for server in (http_server, twilio_server, control):
        server.start()
    board.attach("http", http_server)
    board.attach("twilio", twilio_server)
    try:
        yield http_server, twilio_server, control
    finally:
        for server in (http_server, twilio_server, control):
            server.stop()


def _control(control: SandboxServer, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{control.port}{path}", data=data, method=method)
    with urllib.request.urlopen(request, timeout=5) as answer:
        return json.loads(answer.read())


def test_refused_closes_twilio_s_port_until_the_message_reaches_another_provider(
    servers: tuple[HttpProviderServer, TwilioServer, SandboxServer], http: HttpProvider
) -> None:
    http_server, twilio_server, control = servers
    assert not _refused(twilio_server.port)

    armed = _control(
        control, "PUT", "/faults", {"provider": "twilio", "to": "+15550100001", "mode": "refused"}
    )
    assert armed["fault"]["provider"] == "twilio"
    assert _refused(twilio_server.port)
    assert not _refused(http_server.port)
    # Another recipient, or another channel, is not the message the fault refused.
    http.send(BEARER, "other", http_body("other", to="+15550100009"))
    http.send(BEARER, "imsg", http_body("imsg", channel="imessage"))
    assert _refused(twilio_server.port)
    assert _control(control, "GET", "/faults")["faults"][0]["count"] == 1

    http.send(BEARER, "m1", http_body("m1"))  # the failover: the refused fault is used up

    assert not _refused(twilio_server.port)
    assert _control(control, "GET", "/faults") == {"faults": []}


def test_refused_closes_the_http_provider_s_port_and_twilio_or_sns_count_the_failover(
    servers: tuple[HttpProviderServer, TwilioServer, SandboxServer],
    twilio: TwilioProvider,
    board: FaultBoard,
) -> None:
    http_server, _, control = servers
    _control(control, "PUT", "/faults", {"provider": "http", "channel": "sms", "mode": "refused", "count": 2})
    assert _refused(http_server.port)
    assert not _refused(control.port)  # the control endpoints stay up

    assert twilio.create(GOOD_AUTH, SID, form()).status == 201
    assert _refused(http_server.port)
    board.received("sns", "sms", "+15550100001")  # what the emulated SNS accepted counts too

    assert not _refused(http_server.port)


def test_delete_faults_reopens_every_refused_port(
    servers: tuple[HttpProviderServer, TwilioServer, SandboxServer],
) -> None:
    http_server, twilio_server, control = servers
    _control(control, "PUT", "/faults", {"provider": "twilio", "mode": "refused", "count": 5})
    _control(control, "PUT", "/faults", {"provider": "http", "channel": "imessage", "mode": "refused"})
    assert _refused(twilio_server.port)
    assert _refused(http_server.port)

    assert _control(control, "DELETE", "/faults") == {"faults": []}

    assert not _refused(twilio_server.port)
    assert not _refused(http_server.port)
    request = urllib.request.Request(
        f"http://127.0.0.1:{http_server.port}/messages",
        data=http_body("after"),
        headers={"Authorization": BEARER, "Idempotency-Key": "after"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        assert answer.status == 201


def test_the_sandbox_s_main_port_still_takes_the_http_provider_s_calls(
    servers: tuple[HttpProviderServer, TwilioServer, SandboxServer], log: DeliveryLog
) -> None:
    _, _, control = servers
    request = urllib.request.Request(
        f"http://127.0.0.1:{control.port}/messages",
        data=http_body("old"),
        headers={"Authorization": BEARER, "Idempotency-Key": "old"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        assert answer.status == 201
    assert _control(control, "GET", "/deliveries")["deliveries"][0]["provider"] == "http"
    assert log.all()[0]["messageId"] == "old"


# ---------------------------------------------------------------------------- local wiring
@pytest.fixture(scope="module")
def template() -> Template:
    return load_template(REPO / "template.yaml")


def test_the_dispatchers_are_pointed_at_the_sandbox_s_providers(template: Template) -> None:
    ports = Ports(api=3000, aws=5000, sandbox=3001)
    parameters = local_parameters(template, {"SmsProviders": "twilio,http"}, ports)

    env = function_environment(template, ports, environ={}, parameters=parameters)

    assert (ports.twilio, ports.http_provider) == (3002, 3003)
    assert env["SENDONCE_TWILIO_BASE_URL"] == "http://127.0.0.1:3002"
    assert env["SENDONCE_HTTP_PROVIDER_URL"] == "http://127.0.0.1:3003"
    assert env["SENDONCE_TWILIO_STATUS_CALLBACK_URL"] == "http://127.0.0.1:3000/v1/webhooks/twilio"
    assert env["SENDONCE_TWILIO_VISIBILITY_SECONDS"] == "1"
    assert env["SENDONCE_TWILIO_FROM"] == "+15005550006"
    assert env["SENDONCE_SMS_PROVIDERS"] == "twilio,http"
    assert env["SENDONCE_TWILIO_CREDENTIALS_ARN"] == "TwilioCredentialsSecret"


def test_an_override_of_twilio_s_url_wins_over_the_sandbox(template: Template) -> None:
    ports = Ports(api=3000, aws=5000, sandbox=3001, twilio=4002)
    parameters = local_parameters(template, {"TwilioBaseUrl": "https://api.twilio.com"}, ports)

    env = function_environment(template, ports, environ={}, parameters=parameters)

    assert env["SENDONCE_TWILIO_BASE_URL"] == "https://api.twilio.com"
    assert Ports.from_environment({"SENDONCE_SANDBOX_TWILIO_PORT": "4002"}).twilio == 4002


def test_sms_providers_in_order_are_a_value_the_template_accepts(template: Template) -> None:
    check(template, {"SmsProviders": "twilio,http", "TwilioVisibilitySeconds": "1"})


class FakeSecretsManager:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def create_secret(self, Name: str, SecretString: str) -> dict[str, str]:
        self.values[Name] = SecretString
        return {"ARN": f"arn:aws:secretsmanager:us-east-1:123456789012:secret:{Name}"}


def test_twilio_s_generated_secret_holds_the_local_credentials(template: Template) -> None:
    from sendonce_local.intrinsics import Resolver  # noqa: PLC0415

    secrets = LocalSecrets.generate({})
    manager = FakeSecretsManager()

    create_secrets(
        manager, template, Resolver(template, "http://x", secrets.parameters()), secrets.generated()
    )

    value = json.loads(manager.values[TWILIO_CREDENTIALS_SECRET])
    assert value == {"accountSid": secrets.twilio.account_sid, "authToken": secrets.twilio.auth_token}
    assert secrets.twilio.auth_token not in repr(secrets)


def test_a_generated_secret_without_a_local_value_follows_its_template(tmp_path: Path) -> None:
    from sendonce_local.intrinsics import Resolver  # noqa: PLC0415
    from sendonce_local.template import parse_template  # noqa: PLC0415

    snippet = parse_template(
        {
            "Resources": {
                "Other": {
                    "Type": "AWS::SecretsManager::Secret",
                    "Properties": {
                        "GenerateSecretString": {
                            "SecretStringTemplate": '{"user": "me"}',
                            "GenerateStringKey": "password",
                            "PasswordLength": 20,
                        }
                    },
                }
            }
        },
        tmp_path,
    )
    manager = FakeSecretsManager()

    create_secrets(manager, snippet, Resolver(snippet, "http://x"))

    value = json.loads(manager.values["Other"])
    assert value["user"] == "me"
    assert len(value["password"]) == 20
