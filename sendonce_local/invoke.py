"""`sendonce invoke`: one function of the template, in one execution environment, on one event file."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from sendonce_local.environment import Ports, apply_environment, function_environment
from sendonce_local.lambda_runtime import LocalFunction
from sendonce_local.parameters import OVERRIDES_SETTING, InvalidParameter, local_parameters, overridden
from sendonce_local.template import Template


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[TextIO]:
    """Send everything written to stdout (fd 1 included) to stderr; yields the real stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    real = os.fdopen(saved, "w", encoding="utf-8", closefd=True)
    try:
        yield real
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        real.close()


def invoke(template: Template, logical_id: str, event_file: Path) -> int:
    if logical_id not in template.functions:
        print(f"no function {logical_id} in the template ({', '.join(template.functions)})", file=sys.stderr)
        return 2
    event: Any = json.loads(event_file.read_text(encoding="utf-8"))
    ports = Ports.from_environment()
    try:
        parameters = local_parameters(template, overridden(), ports)
    except InvalidParameter as error:
        print(f"{OVERRIDES_SETTING}: {error}", file=sys.stderr)
        return 2
    apply_environment(function_environment(template, ports, parameters=parameters))
    with stdout_to_stderr() as real_stdout:
        try:
            result = LocalFunction(template.functions[logical_id]).invoke(event)
            code = 0
        except Exception as error:
            traceback.print_exc()
            result = {
                "errorMessage": str(error),
                "errorType": type(error).__name__,
                "stackTrace": traceback.format_tb(error.__traceback__),
            }
            code = 1
        real_stdout.write(json.dumps(result, default=str) + "\n")
        real_stdout.flush()
    return code
