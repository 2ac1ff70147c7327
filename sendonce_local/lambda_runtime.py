"""Runs a template's handlers as Lambda does: each execution environment takes one invocation at a time.

An execution environment is a process that imports the handler once and then serves invocations one
after another, so whatever a handler keeps in module-level state (Powertools' current event, cached
clients) belongs to one invocation at a time, exactly as in Lambda. A function scales out as Lambda
does: an invocation takes an idle environment, or starts a new one (a cold start) while the function
has fewer than `MAX_ENVIRONMENTS`, or waits for one to become idle (where Lambda would throttle).
Events and results cross the process boundary as JSON, as they cross Lambda's runtime API.

Environments are forked from a fork server that has already imported what the handlers import, so
a cold start costs a fork and the handler file, not the whole dependency tree. An environment ends
when the process that started it does (it reads end-of-file on its pipe).

`LocalFunction.load()` imports a handler into the calling process, for in-process tools that call it
from one thread (the bench's probes).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import multiprocessing
import re
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from types import ModuleType
from typing import Any

from sendonce_local.intrinsics import function_arn
from sendonce_local.template import FunctionSpec

log = logging.getLogger("local-stack.lambda")

Handler = Callable[[Any, Any], Any]

MAX_ENVIRONMENTS = 10  # per function: the local stand-in for the account's concurrency limit
_CONTEXT = multiprocessing.get_context("forkserver")
# Always in the fork server: the runtime itself and what every Python handler of the template needs.
_BASE_PRELOAD = ("sendonce_local.lambda_runtime", "json", "boto3", "botocore.session")
_CONTEXT.set_forkserver_preload(list(_BASE_PRELOAD))


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


class HandlerError(Exception):
    """The handler raised: `error_type` names its exception, the message carries its traceback."""

    error_type = "HandlerError"


_ERROR_TYPES: dict[str, type[HandlerError]] = {}


def handler_error(error_type: str, message: str, trace: str) -> HandlerError:
    """An exception whose type has the name of the handler's own (what Lambda reports as errorType)."""
    name = error_type if error_type.isidentifier() else "HandlerError"
    cls = _ERROR_TYPES.get(name)
    if cls is None:
        cls = _ERROR_TYPES[name] = type(name, (HandlerError,), {"error_type": name})
    return cls(f"{message}\n--- in the execution environment ---\n{trace}")


def module_name(logical_id: str) -> str:
    return "sendonce_fn_" + re.sub(r"\W", "_", logical_id)


def import_handler(spec: FunctionSpec) -> Handler:
    """The handler of `spec`, its module imported by file path (no sys.path edits)."""
    attribute = spec.handler.rpartition(".")[2]
    file = spec.handler_file
    if not file.is_file():
        raise FileNotFoundError(f"{spec.logical_id}: handler file {file} does not exist")
    module_spec = importlib.util.spec_from_file_location(module_name(spec.logical_id), file)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"{spec.logical_id}: cannot load {file}")
    module: ModuleType = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    handler: Handler = getattr(module, attribute)
    return handler


def handler_imports(spec: FunctionSpec) -> list[str]:
    """The absolute modules a handler file imports at its top level, or inside a `with` there (its
    `frozen_imports()` block): what the fork server preloads."""
    try:
        tree = ast.parse(spec.handler_file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    top_level = [n for node in tree.body for n in (node.body if isinstance(node, ast.With) else [node])]
    names: list[str] = []
    for node in top_level:
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def preload(specs: Iterable[FunctionSpec]) -> None:
    """What the fork server imports before it forks the first environment (no effect once it runs)."""
    names = list(_BASE_PRELOAD)
    for spec in specs:
        names.extend(name for name in handler_imports(spec) if name not in names)
    _CONTEXT.set_forkserver_preload(names)


def _serve(spec: FunctionSpec, connection: Connection) -> None:
    """An execution environment: import the handler once, then run one invocation at a time."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the stack, which then ends this process
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(line_buffering=True)  # the handler's log lines as they happen
    try:
        handler = import_handler(spec)
    except BaseException as error:
        connection.send(("failed", _describe(error)))
        return
    connection.send(("ready", None))
    while True:
        try:
            event = json.loads(connection.recv_bytes())
        except (EOFError, OSError):
            return  # the stack is gone
        try:
            outcome: tuple[str, Any] = ("ok", json.dumps(handler(event, LambdaContext(spec))))
        except Exception as error:
            outcome = ("error", _describe(error))
        sys.stdout.flush()
        connection.send(outcome)


def _describe(error: BaseException) -> tuple[str, str, str]:
    return type(error).__name__, str(error), traceback.format_exc()


class ExecutionEnvironment:
    """One process running one function's handler; not thread-safe (one invocation at a time)."""

    def __init__(self, spec: FunctionSpec, number: int) -> None:
        ours, theirs = _CONTEXT.Pipe()
        self._process = _CONTEXT.Process(
            target=_serve, args=(spec, theirs), name=f"{spec.logical_id}-{number}", daemon=True
        )
        self._process.start()
        theirs.close()
        self._connection = ours
        try:
            status, detail = ours.recv()
        except EOFError:
            self.stop()
            raise RuntimeError(f"{spec.logical_id}: its execution environment ended while starting") from None
        if status != "ready":
            self.stop()
            raise handler_error(*detail)

    def invoke(self, event: Any) -> Any:
        self._connection.send_bytes(json.dumps(event).encode("utf-8"))
        status, detail = self._connection.recv()
        if status == "ok":
            return json.loads(detail)
        raise handler_error(*detail)

    def stop(self) -> None:
        self._connection.close()
        if self._process.is_alive():
            self._process.terminate()
        self._process.join(timeout=5)


class LocalFunction:
    def __init__(self, spec: FunctionSpec, max_environments: int = MAX_ENVIRONMENTS) -> None:
        self.spec = spec
        self._max_environments = max_environments
        self._idle: list[ExecutionEnvironment] = []
        self._environments = 0  # idle and busy
        self._started = 0
        self._changed = threading.Condition()
        self._handler: Handler | None = None
        self._load_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.spec.logical_id

    @property
    def max_environments(self) -> int:
        """The most invocations it runs at once, whichever event sources invoke it."""
        return self._max_environments

    @property
    def environments(self) -> int:
        """How many execution environments the function has now (idle and busy)."""
        with self._changed:
            return self._environments

    def load(self) -> Handler:
        """The handler imported into this process (once), for in-process tools calling from one thread."""
        with self._load_lock:
            if self._handler is None:
                self._handler = import_handler(self.spec)
            return self._handler

    def warm(self) -> None:
        """Start one execution environment now (an import error surfaces here, not on first use)."""
        self._release(self._acquire())

    def invoke(self, event: Any) -> Any:
        """Run the handler in an execution environment; its exceptions propagate as HandlerError."""
        environment = self._acquire()
        started = time.monotonic()
        try:
            result = environment.invoke(event)
        except HandlerError:
            self._release(environment)
            raise
        except BaseException:
            self._discard(environment)  # the environment died (or its pipe broke): Lambda starts anew
            raise
        finally:
            elapsed = time.monotonic() - started
            if elapsed > self.spec.timeout_seconds:
                log.warning(
                    "%s ran %.1fs, over its %ss timeout (Lambda would have stopped it)",
                    self.name,
                    elapsed,
                    self.spec.timeout_seconds,
                )
        self._release(environment)
        return result

    def stop(self) -> None:
        with self._changed:
            idle, self._idle = self._idle, []
            self._environments -= len(idle)
        for environment in idle:
            environment.stop()

    def _acquire(self) -> ExecutionEnvironment:
        with self._changed:
            while not self._idle and self._environments >= self._max_environments:
                self._changed.wait()
            if self._idle:
                return self._idle.pop()
            self._environments += 1
            self._started += 1
            number = self._started
        try:
            return ExecutionEnvironment(self.spec, number)  # a cold start, outside the lock
        except BaseException:
            with self._changed:
                self._environments -= 1
                self._changed.notify()
            raise

    def _release(self, environment: ExecutionEnvironment) -> None:
        with self._changed:
            self._idle.append(environment)
            self._changed.notify()

    def _discard(self, environment: ExecutionEnvironment) -> None:
        environment.stop()
        with self._changed:
            self._environments -= 1
            self._changed.notify()


class FunctionRegistry:
    def __init__(self, specs: dict[str, FunctionSpec]) -> None:
        preload(specs.values())
        self._functions = {name: LocalFunction(spec) for name, spec in specs.items()}

    def __getitem__(self, name: str) -> LocalFunction:
        return self._functions[name]

    def names(self) -> list[str]:
        return list(self._functions)

    def load_all(self) -> None:
        """One warm execution environment per function: a handler that cannot load fails the start."""
        for function in self._functions.values():
            function.warm()

    def stop(self) -> None:
        for function in self._functions.values():
            function.stop()
