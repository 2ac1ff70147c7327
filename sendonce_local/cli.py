"""The `sendonce` command: `run`, `invoke`, `create-api-key`, `release-lock`, `resolve`, `workspace
set-limits` and `suppressions list|add|remove`."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

import boto3
from sendonce import channels
from sendonce.clock import rfc3339
from sendonce.modes import Mode

from sendonce_local.api_keys import store_api_key
from sendonce_local.aws_client import client
from sendonce_local.constants import REGION
from sendonce_local.environment import LOCAL_LIMITS, Ports
from sendonce_local.release_lock import describe, release_lock
from sendonce_local.template import default_template_path

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Not named "sendonce...": Powertools' Logger(service="sendonce") filters every record whose logger
# name contains its service name out of the root handlers.


def _configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format=LOG_FORMAT, stream=sys.stderr
    )
    for noisy in ("botocore", "boto3", "urllib3", "werkzeug", "moto"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)  # "pool is full" under bursts


def _run(args: argparse.Namespace) -> int:
    from sendonce_local.parameters import InvalidParameter, local_parameters, overridden  # noqa: PLC0415
    from sendonce_local.stack import LocalStack  # noqa: PLC0415 - moto and the handlers: only for `run`
    from sendonce_local.template import load_template  # noqa: PLC0415

    template = load_template(args.template)
    try:
        parameters = local_parameters(template, overridden(words=args.parameter_overrides))
    except InvalidParameter as error:
        print(f"sendonce run: --parameter-overrides: {error}; nothing started", file=sys.stderr)
        return 2
    stack = LocalStack(template, Ports.from_environment(), parameters)

    def stop(signum: int, frame: FrameType | None) -> None:
        stack.request_stop()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        stack.start()
    except OSError as error:
        logging.getLogger("local-stack.local").error("could not start the local stack: %s", error)
        stack.stop()
        return 1
    print(stack.banner(), flush=True)
    stack.wait()
    logging.getLogger("local-stack.local").info("stopping")
    stack.stop()
    return 0


def _invoke(args: argparse.Namespace) -> int:
    from sendonce_local.invoke import invoke  # noqa: PLC0415 - only for `invoke`
    from sendonce_local.template import load_template  # noqa: PLC0415

    return invoke(load_template(args.template), args.logical_id, args.event)


def _create_api_key(args: argparse.Namespace) -> int:
    if args.endpoint_url:
        dynamodb = client("dynamodb", args.endpoint_url)
    else:
        dynamodb = boto3.session.Session(region_name=args.region).client("dynamodb")
    mode = Mode.TEST if args.test else Mode.LIVE
    try:
        key = store_api_key(dynamodb, args.table, args.workspace, mode=mode)
    except ValueError as error:
        print(f"sendonce create-api-key: {error}; nothing stored", file=sys.stderr)
        return 2
    which = "new test API key (its test twin: no provider is ever called)" if args.test else "new API key"
    print(f"workspace {args.workspace}: {which} (shown once, store it now):", file=sys.stderr)
    print(key)
    return 0


def _release_lock(args: argparse.Namespace) -> int:
    if args.aws:
        dynamodb = boto3.session.Session(region_name=args.region).client("dynamodb")
    else:
        dynamodb = client("dynamodb", args.endpoint_url or Ports.from_environment().aws_endpoint)
    try:
        released = release_lock(
            dynamodb,
            args.table,
            workspace=args.workspace,
            channel=args.channel,
            to=args.to,
            subject=args.subject,
            body=args.body,
        )
    except ValueError as error:
        print(f"sendonce release-lock: --to {args.to!r} {error}", file=sys.stderr)
        return 2
    print(describe(released, time.time()))
    return 0


def _resolve(args: argparse.Namespace) -> int:
    from sendonce.delivery.resolution import Resolution  # noqa: PLC0415 - the layer: only for `resolve`
    from sendonce.errors import DependencyUnavailable  # noqa: PLC0415
    from sendonce.observability import logger  # noqa: PLC0415

    from sendonce_local.resolve import describe, resolve  # noqa: PLC0415

    if args.aws:
        dynamodb = boto3.session.Session(region_name=args.region).client("dynamodb")
    else:
        dynamodb = client("dynamodb", args.endpoint_url or Ports.from_environment().aws_endpoint)
    level = logger.log_level
    logger.setLevel(logging.WARNING)  # the package's info lines would mix with the answer on stdout
    try:
        resolved = resolve(dynamodb, args.table, args.message_id, args.outcome)
    except ValueError as error:
        print(f"sendonce resolve: {error}", file=sys.stderr)
        return 2
    except DependencyUnavailable as error:
        print(f"sendonce resolve: the messages table could not be reached: {error}", file=sys.stderr)
        return 1
    finally:
        logger.setLevel(level)
    answer = describe(resolved, args.message_id, args.outcome)
    if resolved.resolution is not Resolution.SETTLED:
        print(f"sendonce resolve: {answer}", file=sys.stderr)
        return 1
    print(answer)
    return 0


RESOLVE_HELP = """\
Settle a message whose delivery outcome is unknown (a 5xx or a timeout from SES or SNS after the
request left; such a message is never retried automatically). Find out from the provider whether
it was delivered, then record it: --as sent, or --as failed (which releases its dedup lock, so an
identical message may be sent again). Only an unknown message can be resolved: for any other
status nothing changes and the command exits with status 1.

Local stack (default): the emulator on 127.0.0.1:$SENDONCE_AWS_PORT (5000), table MessagesTable.
Deployed stack: pass --aws (your default boto3 session: AWS_PROFILE, AWS_REGION, credentials) and
--table <the stack's MessagesTable name>."""


RELEASE_LOCK_HELP = """\
Delete the dedup lock of (workspace, recipient, subject, body), so that an identical message is
sent again inside the dedup window: the manual escape hatch for the rare case where a duplicate
is wanted. The identity is computed exactly as the API does (recipient normalised for the
channel: '+1 (555) 010-0000' and '+15550100000' are one lock). Prints whether a lock was there.

Local stack (default): the emulator on 127.0.0.1:$SENDONCE_AWS_PORT (5000), table MessagesTable.
Deployed stack: pass --aws (your default boto3 session: AWS_PROFILE, AWS_REGION, credentials) and
--table <the stack's MessagesTable name>."""


def _set_limits(args: argparse.Namespace) -> int:
    from sendonce.adapters.dynamodb_limits import DynamoDbLimits  # noqa: PLC0415 - only for this command
    from sendonce.errors import DependencyUnavailable  # noqa: PLC0415
    from sendonce.limits.model import MAX_CACHE_SECONDS, Limits  # noqa: PLC0415

    if args.aws:
        dynamodb = boto3.session.Session(region_name=args.region).client("dynamodb")
        cache_seconds = MAX_CACHE_SECONDS  # whatever the deployed functions keep, never longer
    else:
        dynamodb = client("dynamodb", args.endpoint_url or Ports.from_environment().aws_endpoint)
        cache_seconds = int(
            os.environ.get("SENDONCE_LIMITS_CACHE_SECONDS") or LOCAL_LIMITS["SENDONCE_LIMITS_CACHE_SECONDS"]
        )
    limits = DynamoDbLimits(dynamodb, args.table, defaults=Limits(rate_per_second=1, daily_quota=0))
    try:  # every value is checked before anything is written
        change = limits.set_limits(args.workspace, args.rate, args.daily_quota, cache_seconds=cache_seconds)
    except ValueError as error:
        print(f"sendonce workspace set-limits: {error}; nothing changed", file=sys.stderr)
        return 2
    except DependencyUnavailable as error:
        print(
            f"sendonce workspace set-limits: the limits table could not be reached: {error}", file=sys.stderr
        )
        return 1
    chosen = []
    if args.rate is not None:
        chosen.append(f"rate {args.rate}/s")
    if args.daily_quota is not None:
        chosen.append(f"daily quota {args.daily_quota}" if args.daily_quota else "no daily quota")
    effective = datetime.fromtimestamp(change.at, UTC)
    print(f"workspace {args.workspace}: {', '.join(chosen)}, in effect from {rfc3339(effective)}")
    if args.wait:
        time.sleep(max(0.0, change.at - time.time()))
    return 0


SET_LIMITS_HELP = """\
Override a workspace's request rate (requests a second; bursts up to twice it) and daily send
quota (new messages a UTC day; 0 means none). A limit not given keeps its current value. Values
are checked before anything is written: a negative or absurd one changes nothing. The change takes
effect at the instant printed, the same for every execution environment: once each can have read
it (SENDONCE_LIMITS_CACHE_SECONDS, at most 5; 1 locally), at most 8 seconds after it was written.
The day's usage is kept: a lowered quota admits only what is left under it. --wait returns once
the change is in effect.

Local stack (default): the emulator on 127.0.0.1:$SENDONCE_AWS_PORT (5000), table LimitsTable.
Deployed stack: pass --aws (your default boto3 session) and --table <the stack's LimitsTableName>."""


def _suppressions(args: argparse.Namespace) -> int:
    from sendonce.channels import UnknownChannel  # noqa: PLC0415 - the layer: only for this command
    from sendonce.errors import DependencyUnavailable, SuppressionNotFound  # noqa: PLC0415
    from sendonce.messages.recipients import InvalidRecipient  # noqa: PLC0415

    from sendonce_local.suppressions import Quiet, every_entry, line, service  # noqa: PLC0415

    if args.aws:
        dynamodb = boto3.session.Session(region_name=args.region).client("dynamodb")
    else:
        dynamodb = client("dynamodb", args.endpoint_url or Ports.from_environment().aws_endpoint)
    suppressions = service(dynamodb, args.table)
    name = f"sendonce suppressions {args.suppressions_command}"
    try:
        with Quiet():
            if args.suppressions_command == "list":
                for entry in every_entry(suppressions, args.workspace):
                    print(line(entry))
                return 0
            if args.suppressions_command == "add":
                entry, created = suppressions.add(args.workspace, args.channel, args.to)
                print(line(entry))
                if not created:
                    print(f"{name}: already on the list; the entry is unchanged", file=sys.stderr)
                return 0
            suppressions.remove(args.workspace, args.to)
    except (InvalidRecipient, UnknownChannel) as error:
        print(f"{name}: --to {args.to!r} {error}; nothing changed", file=sys.stderr)
        return 2
    except SuppressionNotFound:
        print(f"{name}: {args.to} is not on workspace {args.workspace}'s list", file=sys.stderr)
        return 1
    except DependencyUnavailable as error:
        print(f"{name}: the messages table could not be reached: {error}", file=sys.stderr)
        return 1
    print(f"{args.to}: removed from workspace {args.workspace}'s suppression list; sends to it work again")
    return 0


SUPPRESSIONS_HELP = """\
A workspace's suppression list: the recipients it never sends to (a STOP reply, a permanent
bounce, a complaint, or added by hand). One entry covers every channel that reaches the recipient.
`list` prints one JSON entry a line, newest first; `add` puts a recipient on the list (reason
manual; an existing entry is kept as it is); `remove` takes one off, after the recipient opted back
in (a STOP to the shared number is removed for this workspace only).

Local stack (default): the emulator on 127.0.0.1:$SENDONCE_AWS_PORT (5000), table MessagesTable.
Deployed stack: pass --aws (your default boto3 session) and --table <the stack's MessagesTableName>."""


def _add_messages_table(
    command: argparse.ArgumentParser, table: str = "MessagesTable", what: str = "the messages table"
) -> None:
    """Which table a command acts on: the local stack's, another endpoint's, or a deployed one."""
    command.add_argument("--table", default=table, help=f"{what} (default: {table}, the local name)")
    target = command.add_mutually_exclusive_group()
    target.add_argument(
        "--endpoint-url",
        default=None,
        help="the DynamoDB endpoint (default: the local stack's, http://127.0.0.1:$SENDONCE_AWS_PORT)",
    )
    target.add_argument(
        "--aws", action="store_true", help="a deployed stack: the default boto3 session, no endpoint"
    )
    command.add_argument(
        "--region", default=None, help=f"AWS region with --aws (default: your AWS config; {REGION} locally)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sendonce", description="The sendonce local stack and tools.")
    parser.add_argument(
        "--template",
        type=Path,
        default=None,
        help="the SAM template (default: $SENDONCE_TEMPLATE, else template.yaml)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="serve the local stack in the foreground until interrupted")
    run.add_argument(
        "--parameter-overrides",
        nargs="+",
        default=[],
        metavar="Name=Value",
        help="values for the template's parameters, as `sam deploy --parameter-overrides` takes them"
        " (e.g. WebhookDeliveryMaxConcurrency=5); on top of $SENDONCE_LOCAL_PARAMETER_OVERRIDES,"
        " the same words",
    )

    invoke = commands.add_parser("invoke", help="run one function of the template on one event file")
    invoke.add_argument("logical_id", help="the function's logical id, e.g. ApiFunction")
    invoke.add_argument("--event", "-e", type=Path, required=True, help="a JSON event file")

    create = commands.add_parser("create-api-key", help="issue an API key for a workspace (shown once)")
    create.add_argument("--workspace", required=True)
    create.add_argument(
        "--test",
        action="store_true",
        help="a test key (sk_test_…), of the workspace's test twin: its sends reach the simulator only",
    )
    create.add_argument(
        "--table", default="ApiKeysTable", help="the stack's ApiKeysTableName output (default: ApiKeysTable)"
    )
    create.add_argument(
        "--endpoint-url", default=None, help="e.g. http://127.0.0.1:5000 for the local stack (default: AWS)"
    )
    create.add_argument(
        "--region", default=None, help=f"AWS region (default: your AWS config, or {REGION} locally)"
    )

    release = commands.add_parser(
        "release-lock",
        help="delete the dedup lock of one message identity (local stack, or a deployed one with --aws)",
        description=RELEASE_LOCK_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    release.add_argument("--workspace", required=True, help="the workspace id the API key belongs to")
    release.add_argument("--channel", required=True, choices=channels.names())
    release.add_argument("--to", required=True, help="the recipient, in any form the API accepts")
    release.add_argument("--body", required=True, help="the message body, exactly as sent")
    release.add_argument("--subject", default=None, help="the subject, exactly as sent (email)")
    _add_messages_table(release)

    settle = commands.add_parser(
        "resolve",
        help="settle an unknown message as sent or failed (local stack, or a deployed one with --aws)",
        description=RESOLVE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    settle.add_argument("message_id", help="the message's id, msg_…")
    settle.add_argument("--as", dest="outcome", required=True, choices=["sent", "failed"])
    _add_messages_table(settle)

    workspace = commands.add_parser("workspace", help="a workspace's settings")
    workspace_commands = workspace.add_subparsers(dest="workspace_command", required=True)
    set_limits = workspace_commands.add_parser(
        "set-limits",
        help="override a workspace's request rate and daily send quota",
        description=SET_LIMITS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    set_limits.add_argument("workspace", help="the workspace id")
    set_limits.add_argument("--rate", type=int, default=None, help="requests a second (1 to 100,000)")
    set_limits.add_argument(
        "--daily-quota",
        type=int,
        default=None,
        help="new messages a UTC day (0: none; at most 1,000,000,000)",
    )
    set_limits.add_argument("--wait", action="store_true", help="return once the change is in effect")
    _add_messages_table(set_limits, "LimitsTable", "the limits table")

    suppressions = commands.add_parser(
        "suppressions",
        help="a workspace's suppression list: list, add, remove (local stack, or a deployed one with --aws)",
        description=SUPPRESSIONS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    suppression_commands = suppressions.add_subparsers(dest="suppressions_command", required=True)
    listing = suppression_commands.add_parser("list", help="every entry, newest first, one JSON line each")
    listing.add_argument("--workspace", required=True, help="the workspace id the API key belongs to")
    _add_messages_table(listing)
    add = suppression_commands.add_parser("add", help="put a recipient on the list (reason manual)")
    add.add_argument("--workspace", required=True, help="the workspace id the API key belongs to")
    add.add_argument("--channel", required=True, choices=channels.names())
    add.add_argument("--to", required=True, help="the recipient, in any form the channel accepts")
    _add_messages_table(add)
    remove = suppression_commands.add_parser("remove", help="take a recipient off the list")
    remove.add_argument("--workspace", required=True, help="the workspace id the API key belongs to")
    remove.add_argument("--to", required=True, help="the phone number or address, in any form")
    _add_messages_table(remove)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    if args.template is None:
        override = os.environ.get("SENDONCE_TEMPLATE")
        args.template = Path(override) if override else default_template_path()
    commands = {
        "run": _run,
        "invoke": _invoke,
        "create-api-key": _create_api_key,
        "release-lock": _release_lock,
        "resolve": _resolve,
        "workspace": _set_limits,
        "suppressions": _suppressions,
    }
    return commands[args.command](args)
