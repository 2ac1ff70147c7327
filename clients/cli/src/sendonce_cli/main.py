"""The `sendonce` command: an operator's commands on a stack's tables, `create-api-key`,
`release-lock`, `resolve`, `workspace set-limits` and `suppressions list|add|remove`, on the local
stack's emulator by default or a deployed stack with `--aws`; and the commands other distributions
add (`sendonce_cli.commands`: the local stack's `run` and `invoke`).

Nothing here imports the local stack or its emulator: an operator installs this package and the
layer package alone.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sendonce import channels
from sendonce.clock import rfc3339
from sendonce.modes import Mode

from sendonce_cli.api_keys import store_api_key
from sendonce_cli.commands import DEVELOPMENT_COMMANDS, HOW_TO_GET, Command, installed
from sendonce_cli.release_lock import describe, release_lock
from sendonce_cli.targets import (
    LOCAL_LIMITS_CACHE_SECONDS,
    REGION,
    client,
    deployed_client,
    local_aws_endpoint,
)

# The hashing key's secret in the local stack (its logical id); a deployed stack's is its ARN.
HASHING_KEY_SECRET = "HashingKeySecret"  # noqa: S105 - a name, not a value
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Not named "sendonce...": Powertools' Logger(service="sendonce") filters every record whose logger
# name contains its service name out of the root handlers.


def _configure_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format=LOG_FORMAT, stream=sys.stderr
    )
    for noisy in ("botocore", "boto3", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)  # "pool is full" under bursts


def _dynamodb(args: argparse.Namespace) -> Any:
    """The table's account: a deployed stack's (--aws), the given endpoint's, or the local stack's."""
    if args.aws:
        return deployed_client("dynamodb", args.region)
    return client("dynamodb", args.endpoint_url or local_aws_endpoint())


def _keyed_hash(args: argparse.Namespace) -> Any:
    """The stack's keyed hash (`sendonce.keyed_hash`), its key read from the stack's secret on first
    use: the one the functions make every lock and suppression key with."""
    from sendonce.adapters.secrets_manager import SecretsManagerSecret  # noqa: PLC0415 - only when hashing
    from sendonce.keyed_hash import KeyedHash  # noqa: PLC0415

    def secrets() -> Any:
        if args.aws:
            return deployed_client("secretsmanager", args.region)
        return client("secretsmanager", args.endpoint_url or local_aws_endpoint())

    return KeyedHash(SecretsManagerSecret(args.hashing_key_secret, secrets))


def _create_api_key(args: argparse.Namespace) -> int:
    if args.endpoint_url:
        dynamodb = client("dynamodb", args.endpoint_url)
    else:
        dynamodb = deployed_client("dynamodb", args.region)
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
    dynamodb = _dynamodb(args)
    try:
        released = release_lock(
            dynamodb,
            args.table,
            _keyed_hash(args),
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
    from sendonce.dispatch.resolution import Resolution  # noqa: PLC0415 - the layer: only for `resolve`
    from sendonce.errors import DependencyUnavailable  # noqa: PLC0415
    from sendonce.observability import logger  # noqa: PLC0415

    from sendonce_cli.resolve import describe, resolve  # noqa: PLC0415

    dynamodb = _dynamodb(args)
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
    from sendonce.limits.model import (  # noqa: PLC0415
        MAX_CACHE_SECONDS,
        Limits,
        ProtectionChange,
        SendControlsChange,
        sms_countries,
    )

    dynamodb = _dynamodb(args)
    if args.aws:
        cache_seconds = MAX_CACHE_SECONDS  # whatever the deployed functions keep, never longer
    else:
        cache_seconds = int(os.environ.get("SENDONCE_LIMITS_CACHE_SECONDS") or LOCAL_LIMITS_CACHE_SECONDS)
    limits = DynamoDbLimits(dynamodb, args.table, defaults=Limits(rate_per_second=1, daily_quota=0))
    try:  # every value is checked before anything is written
        controls = SendControlsChange(
            per_recipient=args.per_recipient,
            per_recipient_window=args.per_recipient_window,
            quiet_hours=None
            if args.quiet_hours is None
            else ("" if args.quiet_hours == "none" else args.quiet_hours),
            timezone=args.timezone,
        )
        protection = ProtectionChange(
            sms_countries=None
            if args.sms_countries is None
            else sms_countries("" if args.sms_countries == "all" else args.sms_countries),
            allow_premium_numbers=args.allow_premium_numbers,
            daily_sms_segments=args.daily_sms_segments,
            retention_days=args.retention_days,
        )
        change = limits.set_limits(
            args.workspace,
            args.rate,
            args.daily_quota,
            cache_seconds=cache_seconds,
            controls=controls,
            protection=protection,
        )
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
    if change.per_recipient:
        chosen.append(f"at most {change.per_recipient} a recipient in {change.per_recipient_window} s")
    elif args.per_recipient is not None:
        chosen.append("no frequency cap")
    if args.quiet_hours is not None or args.timezone is not None:
        hours = change.quiet_hours or "no quiet hours"
        chosen.append(f"quiet hours {hours} ({change.timezone or 'UTC'})")
    chosen.extend(_protections_chosen(args))
    effective = datetime.fromtimestamp(change.at, UTC)
    print(f"workspace {args.workspace}: {', '.join(chosen)}, in effect from {rfc3339(effective)}")
    if args.wait:
        time.sleep(max(0.0, change.at - time.time()))
    return 0


def _protections_chosen(args: argparse.Namespace) -> list[str]:
    """What the printed summary says of the protections given."""
    chosen = []
    if args.sms_countries is not None:
        countries = args.sms_countries.upper().replace(" ", "")
        chosen.append("sms to every country" if countries in ("ALL", "") else f"sms to {countries}")
    if args.allow_premium_numbers is not None:
        allowed = "allowed" if args.allow_premium_numbers else "refused"
        chosen.append(f"premium-rate and shared-cost numbers {allowed}")
    if args.daily_sms_segments is not None:
        segments = args.daily_sms_segments
        chosen.append(f"{segments} sms segments a day" if segments else "no sms budget")
    if args.retention_days is not None:
        chosen.append(f"messages kept {args.retention_days} days")
    return chosen


SET_LIMITS_HELP = """\
Override a workspace's request rate (requests a second; bursts up to twice it) and daily send
quota (new messages a UTC day; 0 means none). A limit not given keeps its current value. Values
are checked before anything is written: a negative or absurd one changes nothing. The change takes
effect at the instant printed, the same for every execution environment: once each can have read
it (SENDONCE_LIMITS_CACHE_SECONDS, at most 5; 1 locally), at most 8 seconds after it was written.
The day's usage is kept: a lowered quota admits only what is left under it. --wait returns once
the change is in effect.

Send controls: --per-recipient N --per-recipient-window SECONDS caps new messages to one recipient
within any window of that length (429 recipient_capped beyond; 0 removes the cap). --quiet-hours
21:00-08:00 holds a message that would go out within those hours, in the recipient's zone, until
they end ("none" removes them); --timezone ZONE is the workspace's zone, used when neither the send
nor the phone number gives one. A send with "priority": "critical" bypasses both.

Protections: --sms-countries US,CA lets sms (and iMessage to a phone number) go only to numbers of
those countries (ISO 3166 alpha-2; "all": every country; default SENDONCE_SMS_ALLOWED_COUNTRIES);
others are 422 destination_not_allowed. Premium-rate and shared-cost numbers are refused alike
unless --allow-premium-numbers (--no-allow-premium-numbers refuses them again). --daily-sms-segments
N lets a UTC day's sms take at most N segments (429 sms_budget_exceeded beyond; 0: no budget;
default SENDONCE_DAILY_SMS_SEGMENTS). --retention-days N (1 to 365) keeps the workspace's new
messages N days instead of SENDONCE_MESSAGE_RETENTION_DAYS.

Local stack (default): the emulator on 127.0.0.1:$SENDONCE_AWS_PORT (5000), table LimitsTable.
Deployed stack: pass --aws (your default boto3 session) and --table <the stack's LimitsTableName>."""


def _suppressions(args: argparse.Namespace) -> int:
    from sendonce.channels import UnknownChannel  # noqa: PLC0415 - the layer: only for this command
    from sendonce.errors import DependencyUnavailable, SuppressionNotFound  # noqa: PLC0415
    from sendonce.messages.recipients import InvalidRecipient  # noqa: PLC0415

    from sendonce_cli.suppressions import Quiet, every_entry, line, service  # noqa: PLC0415

    dynamodb = _dynamodb(args)
    suppressions = service(dynamodb, args.table, _keyed_hash(args))
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
    command: argparse.ArgumentParser,
    table: str = "MessagesTable",
    what: str = "the messages table",
    *,
    hashing: bool = False,
) -> None:
    """Which table a command acts on: the local stack's, another endpoint's, or a deployed one; and,
    for a command that finds a lock or a suppression (`hashing`), the stack's hashing key."""
    command.add_argument("--table", default=table, help=f"{what} (default: {table}, the local name)")
    if hashing:
        command.add_argument(
            "--hashing-key-secret",
            default=HASHING_KEY_SECRET,
            help=f"the stack's HashingKeySecretArn output (default: {HASHING_KEY_SECRET}, the local name)",
        )
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


def _add_installed(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], found: dict[str, Command]
) -> None:
    """The commands other distributions add; the local stack's, when it is not installed, as names
    that say how to get it (any argument taken, so that `sendonce run --anything` says it too)."""
    names = [*DEVELOPMENT_COMMANDS, *sorted(set(found) - set(DEVELOPMENT_COMMANDS))]
    for name in names:
        command = found.get(name)
        if command is None:
            missing = commands.add_parser(name, add_help=False, help="the local stack's: not installed here")
            missing.set_defaults(handler=None)
            continue
        parser = commands.add_parser(name, help=command.help, description=command.description)
        command.add_arguments(parser)
        parser.set_defaults(handler=command.run)


def _add_set_limits(workspace_commands: Any) -> None:
    """`workspace set-limits`: the limits and the send controls of a workspace."""
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
    _add_send_controls(set_limits)
    _add_protections(set_limits)
    set_limits.add_argument("--wait", action="store_true", help="return once the change is in effect")
    _add_messages_table(set_limits, "LimitsTable", "the limits table")
    set_limits.set_defaults(handler=_set_limits)


def _add_send_controls(set_limits: argparse.ArgumentParser) -> None:
    """The send controls `set-limits` takes (CONTRACT section 16)."""
    set_limits.add_argument(
        "--per-recipient",
        type=int,
        default=None,
        help="frequency cap: new messages to one recipient within the window (0: none; at most 10,000)",
    )
    set_limits.add_argument(
        "--per-recipient-window",
        type=int,
        default=None,
        help="the frequency cap's window, in seconds (60 to 2,592,000)",
    )
    set_limits.add_argument(
        "--quiet-hours",
        default=None,
        help="HH:MM-HH:MM in the recipient's zone, such as 21:00-08:00 (none: no quiet hours)",
    )
    set_limits.add_argument(
        "--timezone", default=None, help="the workspace's zone (IANA, such as Europe/Paris; default UTC)"
    )


def _add_protections(set_limits: argparse.ArgumentParser) -> None:
    """The protections `set-limits` takes (CONTRACT section 18)."""
    set_limits.add_argument(
        "--sms-countries",
        default=None,
        help="the countries sms may go to, ISO 3166 alpha-2 codes such as US,CA (all: every country)",
    )
    set_limits.add_argument(
        "--allow-premium-numbers",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="send to premium-rate and shared-cost numbers (refused by default)",
    )
    set_limits.add_argument(
        "--daily-sms-segments",
        type=int,
        default=None,
        help="sms segments a UTC day (0: none; at most 1,000,000,000)",
    )
    set_limits.add_argument(
        "--retention-days", type=int, default=None, help="how long new messages are kept, in days (1 to 365)"
    )


def build_parser(found: dict[str, Command] | None = None) -> argparse.ArgumentParser:
    """Every command: this package's, and those of the installed distributions (`found`, by default
    what `sendonce_cli.commands.installed` finds)."""
    parser = argparse.ArgumentParser(
        prog="sendonce",
        description="sendonce: an operator's commands on a stack's tables (the local stack's, or a"
        " deployed one with --aws), and the local stack's own when it is installed.",
    )
    parser.add_argument(
        "--template",
        type=Path,
        default=None,
        help="the SAM template, for the local stack's commands (default: $SENDONCE_TEMPLATE, else"
        " template.yaml)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_installed(commands, installed() if found is None else found)

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
    create.set_defaults(handler=_create_api_key)

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
    _add_messages_table(release, hashing=True)
    release.set_defaults(handler=_release_lock)

    settle = commands.add_parser(
        "resolve",
        help="settle an unknown message as sent or failed (local stack, or a deployed one with --aws)",
        description=RESOLVE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    settle.add_argument("message_id", help="the message's id, msg_…")
    settle.add_argument("--as", dest="outcome", required=True, choices=["sent", "failed"])
    _add_messages_table(settle)
    settle.set_defaults(handler=_resolve)

    workspace = commands.add_parser("workspace", help="a workspace's settings")
    workspace_commands = workspace.add_subparsers(dest="workspace_command", required=True)
    _add_set_limits(workspace_commands)

    suppressions = commands.add_parser(
        "suppressions",
        help="a workspace's suppression list: list, add, remove (local stack, or a deployed one with --aws)",
        description=SUPPRESSIONS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    suppressions.set_defaults(handler=_suppressions)
    suppression_commands = suppressions.add_subparsers(dest="suppressions_command", required=True)
    listing = suppression_commands.add_parser("list", help="every entry, newest first, one JSON line each")
    listing.add_argument("--workspace", required=True, help="the workspace id the API key belongs to")
    _add_messages_table(listing, hashing=True)
    add = suppression_commands.add_parser("add", help="put a recipient on the list (reason manual)")
    add.add_argument("--workspace", required=True, help="the workspace id the API key belongs to")
    add.add_argument("--channel", required=True, choices=channels.names())
    add.add_argument("--to", required=True, help="the recipient, in any form the channel accepts")
    _add_messages_table(add, hashing=True)
    remove = suppression_commands.add_parser("remove", help="take a recipient off the list")
    remove.add_argument("--workspace", required=True, help="the workspace id the API key belongs to")
    remove.add_argument("--to", required=True, help="the phone number or address, in any form")
    _add_messages_table(remove, hashing=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unrecognized = parser.parse_known_args(argv)
    if args.handler is None:
        print(f"sendonce {args.command}: not installed here; {HOW_TO_GET}", file=sys.stderr)
        return 2
    if unrecognized:  # as parse_args says it
        parser.error(f"unrecognized arguments: {' '.join(unrecognized)}")
    _configure_logging(args.verbose)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)
