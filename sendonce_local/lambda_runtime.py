"""Runs a template's Lambda handlers in-process, each loaded from its file, with a fake context."""

from __future__ import annotations

import importlib.util
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any

from sendonce_local.intrinsics import function_arn
from sendonce_local.invocation_isolation import isolate_invocations
from sendonce_local.template import FunctionSpec

log = logging.getLogger("local-stack.lambda")

Handler = Callable[[Any, Any], Any]


class LambdaContext:
    """What the Lambda runtime passes a handler as `context`."""

    def __init__(self, spec: FunctionSpec) -> None:
        self.function_name = spec.logical_id
        self.function_version = "$LATEST"
        self.invoked_function_arn = function_arn(spec.logical_id)
        self.memory_limit_in_mb = spec.memory_mb
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{spec.logical_id}"
        self.log_stream_name = f"local/{self.aws_request_id}"
        self.identity = None
        self.client_context = None
        self._deadline = time.monotonic() + spec.timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def module_name(logical_id: str) -> str:
    return "sendonce_fn_" + re.sub(r"\W", "_", logical_id)


class LocalFunction:
    def __init__(self, spec: FunctionSpec) -> None:
        self.spec = spec
        self._handler: Handler | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.spec.logical_id

    def load(self) -> Handler:
        """Import the handler's module by file path (once; thread-safe)."""
        with self._lock:
            if self._handler is None:
                self._handler = self._import()
            return self._handler

    def _import(self) -> Handler:
        isolate_invocations()  # concurrent invocations run in threads: no shared per-request state
        module_path, _, attribute = self.spec.handler.rpartition(".")
        file = self.spec.code_dir / (module_path.replace(".", "/") + ".py")
        if not file.is_file():
            raise FileNotFoundError(f"{self.name}: handler file {file} does not exist")
        spec = importlib.util.spec_from_file_location(module_name(self.name), file)
        if spec is None or spec.loader is None:
            raise ImportError(f"{self.name}: cannot load {file}")
        module: ModuleType = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        handler: Handler = getattr(module, attribute)
        return handler

    def invoke(self, event: Any) -> Any:
        """Call the handler; exceptions propagate to the caller (the emulated AWS service)."""
        handler = self.load()
        context = LambdaContext(self.spec)
        started = time.monotonic()
        try:
            return handler(event, context)
        finally:
            elapsed = time.monotonic() - started
            if elapsed > self.spec.timeout_seconds:
                log.warning(
                    "%s ran %.1fs, over its %ss timeout (Lambda would have stopped it)",
                    self.name,
                    elapsed,
                    self.spec.timeout_seconds,
                )


class FunctionRegistry:
    def __init__(self, specs: dict[str, FunctionSpec]) -> None:
        self._functions = {name: LocalFunction(spec) for name, spec in specs.items()}

    def __getitem__(self, name: str) -> LocalFunction:
        return self._functions[name]

    def names(self) -> list[str]:
        return list(self._functions)

    def load_all(self) -> None:
        for function in self._functions.values():
            function.load()
