"""The local stack's commands, `sendonce run` and `sendonce invoke`: added to the operator CLI's
`sendonce` (sendonce_cli) through its entry-point group `sendonce.commands` (pyproject.toml).

Light to import (`sendonce --help` loads it): the local stack loads only when its command runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from sendonce_cli.commands import Command


def _template(args: argparse.Namespace) -> Path:
    """`sendonce --template`, else $SENDONCE_TEMPLATE, else template.yaml."""
    from sendonce_local.template import default_template_path  # noqa: PLC0415

    if args.template is not None:
        return Path(args.template)
    override = os.environ.get("SENDONCE_TEMPLATE")
    return Path(override) if override else default_template_path()


def _quiet_the_emulator() -> None:
    for noisy in ("werkzeug", "moto"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--parameter-overrides",
        nargs="+",
        default=[],
        metavar="Name=Value",
        help="values for the template's parameters, as `sam deploy --parameter-overrides` takes them"
        " (e.g. WebhookDeliveryMaxConcurrency=5); on top of $SENDONCE_LOCAL_PARAMETER_OVERRIDES,"
        " the same words",
    )


def _run(args: argparse.Namespace) -> int:
    from sendonce_local.environment import Ports  # noqa: PLC0415
    from sendonce_local.parameters import InvalidParameter, local_parameters, overridden  # noqa: PLC0415
    from sendonce_local.stack import LocalStack  # noqa: PLC0415 - moto and the handlers: only for `run`
    from sendonce_local.template import load_template  # noqa: PLC0415

    _quiet_the_emulator()
    template = load_template(_template(args))
    ports = Ports.from_environment()
    try:
        parameters = local_parameters(template, overridden(words=args.parameter_overrides), ports)
    except InvalidParameter as error:
        print(f"sendonce run: --parameter-overrides: {error}; nothing started", file=sys.stderr)
        return 2
    stack = LocalStack(template, ports, parameters)

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


def _invoke_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logical_id", help="the function's logical id, e.g. ApiFunction")
    parser.add_argument("--event", "-e", type=Path, required=True, help="a JSON event file")


def _invoke(args: argparse.Namespace) -> int:
    from sendonce_local.invoke import invoke  # noqa: PLC0415 - only for `invoke`
    from sendonce_local.template import load_template  # noqa: PLC0415

    _quiet_the_emulator()
    return invoke(load_template(_template(args)), args.logical_id, args.event)


RUN = Command(
    help="serve the local stack in the foreground until interrupted",
    add_arguments=_run_arguments,
    run=_run,
)
INVOKE = Command(
    help="run one function of the template on one event file",
    add_arguments=_invoke_arguments,
    run=_invoke,
)
