"""The `sendonce` command: `run`, `invoke` and `create-api-key`."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType

import boto3

from sendonce_local.api_keys import store_api_key
from sendonce_local.constants import REGION
from sendonce_local.emulator import client
from sendonce_local.environment import Ports
from sendonce_local.invoke import invoke
from sendonce_local.stack import LocalStack, default_template_path
from sendonce_local.template import load_template

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
    stack = LocalStack(load_template(args.template), Ports.from_environment())

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
    return invoke(load_template(args.template), args.logical_id, args.event)


def _create_api_key(args: argparse.Namespace) -> int:
    if args.endpoint_url:
        dynamodb = client("dynamodb", args.endpoint_url)
    else:
        dynamodb = boto3.session.Session(region_name=args.region).client("dynamodb")
    key = store_api_key(dynamodb, args.table, args.workspace)
    print(f"workspace {args.workspace}: new API key (shown once, store it now):", file=sys.stderr)
    print(key)
    return 0


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

    commands.add_parser("run", help="serve the local stack in the foreground until interrupted")

    invoke = commands.add_parser("invoke", help="run one function of the template on one event file")
    invoke.add_argument("logical_id", help="the function's logical id, e.g. ApiFunction")
    invoke.add_argument("--event", "-e", type=Path, required=True, help="a JSON event file")

    create = commands.add_parser("create-api-key", help="issue an API key for a workspace (shown once)")
    create.add_argument("--workspace", required=True)
    create.add_argument(
        "--table", default="ApiKeysTable", help="the stack's ApiKeysTableName output (default: ApiKeysTable)"
    )
    create.add_argument(
        "--endpoint-url", default=None, help="e.g. http://127.0.0.1:5000 for the local stack (default: AWS)"
    )
    create.add_argument(
        "--region", default=None, help=f"AWS region (default: your AWS config, or {REGION} locally)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    if args.template is None:
        override = os.environ.get("SENDONCE_TEMPLATE")
        args.template = Path(override) if override else default_template_path()
    commands = {"run": _run, "invoke": _invoke, "create-api-key": _create_api_key}
    return commands[args.command](args)
