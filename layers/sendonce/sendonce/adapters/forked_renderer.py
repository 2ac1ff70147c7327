"""The templates' renderer: a worker process of its own renders, bounded in time, memory and output.

The invariant: the function survives any template; nothing a template does outlives its worker. A
runaway render costs the worker, never the function: the next render forks a fresh one.

Each renderer has one worker, a child forked on its first render (forking per render cost some 7 ms
of copying a large process), that renders request after request. A request is the content's source
texts and the data (`_Request`, msgpack: the data's JSON values, an int past 64 bits as an extension)
down one pipe; the answer (`_Answer`, msgpack) comes back up another; each message is length-prefixed.
The worker parses, compiles and renders within bounds set for each render, and keeps what it compiled
(`jinja.CompiledContents`: a version never changes, so its next renders skip its parse and compile):
- time: from a request's first byte until its answer's last, the worker's own clock runs
  (`setitimer`, SIGALRM at the kernel's default action, which ends it even in the middle of one long
  C call, `'x' * 10**8`); the parent waits `seconds` and a margin, then SIGKILLs it;
- memory: the worker may not grow past its size at fork plus `memory_bytes` (RLIMIT_AS, set once):
  past it an allocation fails, MemoryError, and the worker answers OverLimit("memory") and exits (what
  ran out may have left it fragmented); so it does after a recursion too deep, the same answer;
- output: `jinja.render_parsed` stops past `output_characters`, and the parent reads no answer longer
  than the largest one can be.

The parent never blocks past its deadline (it polls both pipes) and never reads more than an answer's
cap. A worker that is overdue, says too much, dies without a whole answer, or is left mid-request by
an exception in the parent is SIGKILLed, always reaped (`waitpid`), its pipes closed. One that died
without a whole answer was ended by its clock (SIGALRM) or by the parent (SIGKILL): OverLimit("time");
any other death (an allocation failed outside Python's reach, a crash) is taken to be memory:
OverLimit("memory"). A worker found gone between renders (its request pipe broken) is replaced and
the render sent again: nothing of it had run.

A renderer's renders go through its one worker one at a time (its lock); the lock also makes starting
a worker safe when threads race to it. What the worker inherits, and why none of it breaks:
- locks: after the fork the worker has one thread, so it would wait forever only on a lock that
  another thread held at the fork. Parsing takes one, Jinja2's lexer cache's; every parse in this
  process's renderers is made under `_PARSING` (`check`; `render` parses in the worker), and every
  fork of the process waits for it (an `os.register_at_fork` hook), so no thread is mid-parse at a
  fork (the worker itself may parse: it has no other thread). Compiling and rendering take no lock;
  nothing a render does imports a module not yet imported (`_FIRST_USE`), logs or opens a file. (A
  thread parsing with Jinja2 outside a renderer is not covered: the API has none.)
- garbage: the worker freezes what it inherits (`gc.freeze`) before its collector may run, so no
  finalizer of the parent's garbage (a buffered file, a connection) runs in it; the cycles its own
  renders make are collected as usual.
- descriptors: it closes every descriptor but its two pipe ends and 0 to 2, so it holds no socket or
  file of the parent's, nor another worker's pipe.

A worker is SIGKILLed and reaped when its renderer is closed (`close`) or collected, or at the
interpreter's exit; it ends by itself on its request pipe's end of file when the parent dies. A
process forked from the parent (multiprocessing, the local stack) does not share its worker: the fork
hook makes the child forget it (closing its copies of the pipes, killing nothing, with fresh locks),
and a worker is used only by the pid that started it; the child's first render forks its own.
"""

from __future__ import annotations

import contextlib
import encodings.unicode_escape
import gc
import os
import resource
import select
import signal
import threading
import time
import warnings
import weakref
from collections.abc import Mapping
from typing import Any, NoReturn

import jinja2.debug
import msgspec
from msgspec import Struct

from sendonce.templates import jinja
from sendonce.templates.model import TemplateContent
from sendonce.templates.rendering import (
    OUTPUT_CHARACTERS,
    RENDER_SECONDS,
    Forbidden,
    InvalidSource,
    MissingData,
    OverLimit,
    Rendered,
    RenderOutcome,
)

# What rendering imports on first use (a string literal's escapes, a render's error) is imported with
# this module, before any fork: a worker imports nothing, so it never waits on a module's import lock
# that a thread of the parent held at the fork.
_FIRST_USE = (encodings.unicode_escape, jinja2.debug)

# How long after the worker's own clock the parent waits before it kills it: the worker's SIGALRM
# ends it first unless something is badly wrong.
MARGIN_SECONDS = 0.25
# What an answer may take besides its text, which is at most 4 bytes a character in UTF-8.
_ENVELOPE_BYTES = 64 * 1024
_CHUNK = 64 * 1024
# A message's length, before it: 4 bytes, big-endian.
_LENGTH_BYTES = 4
# The msgpack extension that carries an int msgpack cannot (past 64 bits) as its decimal digits: JSON
# data may hold one.
_BIG_INT = 1


class _Request(Struct, frozen=True):
    """What the worker renders: a version's content and a send's data."""

    content: TemplateContent
    data: dict[str, Any]


class _Answer(Struct, frozen=True, omit_defaults=True):
    """The worker's outcome, one field set: the outcomes are untagged Structs, so they go in an envelope."""

    rendered: Rendered | None = None
    missing: MissingData | None = None
    over: OverLimit | None = None
    forbidden: Forbidden | None = None
    # A content that does not parse or compile (never checked): raised again in the parent.
    invalid: str | None = None

    def outcome(self) -> RenderOutcome | None:
        if self.invalid is not None:
            raise jinja.UnrenderableSource(self.invalid)
        return self.rendered or self.missing or self.over or self.forbidden


def _answer(outcome: RenderOutcome) -> _Answer:
    if isinstance(outcome, Rendered):
        return _Answer(rendered=outcome)
    if isinstance(outcome, MissingData):
        return _Answer(missing=outcome)
    if isinstance(outcome, OverLimit):
        return _Answer(over=outcome)
    return _Answer(forbidden=outcome)


class _Stopped(Exception):
    """The worker overran a bound the parent watches (`limit`: "time" or "output")."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


# Every parse of this process's renderers, and every fork of the process (the hooks below): a worker
# never starts with Jinja2's lexer-cache lock held by a thread it does not have.
_PARSING = threading.Lock()
_RENDERERS: weakref.WeakSet[ForkedRenderer] = weakref.WeakSet()


def _before_fork() -> None:
    _PARSING.acquire()


def _after_fork_in_parent() -> None:
    _PARSING.release()


def _after_fork_in_child() -> None:
    # One thread now: the locks as copied may be held by a thread that is not here.
    global _PARSING  # noqa: PLW0603
    _PARSING = threading.Lock()
    for renderer in list(_RENDERERS):
        renderer._after_fork_in_child()


os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
)


def _framed(payload: bytes) -> bytes:
    return len(payload).to_bytes(_LENGTH_BYTES, "big") + payload


def _ints_as_ext(value: Any) -> Any:
    """The data with each int that msgpack cannot carry as a `_BIG_INT` extension."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
        return msgspec.msgpack.Ext(_BIG_INT, str(value).encode("ascii"))
    if isinstance(value, Mapping):
        return {key: _ints_as_ext(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_ints_as_ext(item) for item in value]
    return value


def _ext_as_int(code: int, data: memoryview) -> Any:
    if code != _BIG_INT:
        raise ValueError(f"unknown extension {code}")
    return int(bytes(data))


def _request(content: TemplateContent, data: Mapping[str, Any]) -> bytes:
    try:
        payload = msgspec.msgpack.encode(_Request(content, dict(data)))
    except OverflowError:
        payload = msgspec.msgpack.encode(_Request(content, _ints_as_ext(dict(data))))
    return _framed(payload)


class _Worker:
    """A worker as its parent knows it: its pid, the parent's ends of its pipes, and whose it is."""

    __slots__ = ("answers", "parent", "pid", "requests")

    def __init__(self, pid: int, requests: int, answers: int) -> None:
        self.pid = pid
        self.requests = requests
        self.answers = answers
        self.parent = os.getpid()

    def end(self, kill: bool = True) -> int | None:
        """Closes the pipes and reaps the worker (SIGKILLed first, unless it is known to be ending):
        its wait status, or None when there was none to read."""
        if os.getpid() != self.parent:  # a forked copy of the renderer: not this process's to end
            self.forget()
            return None
        os.close(self.requests)  # the worker's end of file
        try:
            if kill:
                # Not yet reaped, so the pid is still the worker's (unless SIGCHLD is ignored).
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
            try:
                return os.waitpid(self.pid, 0)[1]
            except ChildProcessError:  # reaped by someone else (SIGCHLD ignored): no status to read
                return None
        finally:
            os.close(self.answers)

    def forget(self) -> None:
        """In a process forked from the parent: drop its copies of the pipes, killing nothing."""
        for fd in (self.requests, self.answers):
            with contextlib.suppress(OSError):
                os.close(fd)


class ForkedRenderer:
    """`Renderer`: `check` in process, `render` in this renderer's worker process (the module says
    how). `close` ends the worker; a render after it starts a fresh one."""

    def __init__(
        self,
        seconds: float = RENDER_SECONDS,
        output_characters: int = OUTPUT_CHARACTERS,
        memory_bytes: int = 128 * 2**20,
    ) -> None:
        self._seconds = seconds
        self._output_characters = output_characters
        self._memory_bytes = memory_bytes
        # The worker's compiled contents (each worker starts with none; the parent never renders).
        self._compiled = jinja.CompiledContents()
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        # Ends the worker when the renderer is collected, or at the interpreter's exit.
        self._ending: weakref.finalize[..., ForkedRenderer] | None = None
        _RENDERERS.add(self)

    @property
    def worker_pid(self) -> int | None:
        """The pid of the worker that renders now, None before the first render and after `close`."""
        worker = self._worker
        return worker.pid if worker is not None else None

    def check(self, content: TemplateContent) -> list[InvalidSource]:
        with _PARSING:
            return jinja.check(content)

    def render(self, content: TemplateContent, data: Mapping[str, Any]) -> RenderOutcome:
        """Raises `jinja.UnrenderableSource` for a content that does not parse or compile (`check` it
        first)."""
        request = _request(content, data)
        with self._lock:
            try:
                return self._exchange(self._running(), request)
            except BrokenPipeError:
                # The worker was gone before it had the whole request (killed from outside), so none
                # of it ran: a fresh one renders it. A second time is no accident, and raises.
                return self._exchange(self._running(), request)

    def close(self) -> None:
        """Ends the worker and closes its pipes; nothing when there is none."""
        with self._lock:
            self._end(kill=True)

    def _running(self) -> _Worker:
        worker = self._worker
        if worker is not None and worker.parent != os.getpid():
            # Forked by a means that ran no fork hook: the parent's worker is not this process's.
            self._forget()
            worker = None
        if worker is None:
            worker = self._start()
        return worker

    def _start(self) -> _Worker:
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        forked = False
        try:
            pid = self._fork()
            if pid == 0:
                self._serve(requests_read, answers_write)
            forked = True
        finally:
            # The parent's copies of the worker's ends (the worker never comes back here).
            os.close(requests_read)
            os.close(answers_write)
            if not forked:
                os.close(requests_write)
                os.close(answers_read)
        # A write that would block is waited for with poll, to a deadline.
        os.set_blocking(requests_write, False)
        worker = _Worker(pid, requests_write, answers_read)
        self._worker = worker
        self._ending = weakref.finalize(self, worker.end)
        return worker

    def _end(self, kill: bool) -> int | None:
        """Ends the worker, if any: its wait status (`_Worker.end`)."""
        worker = self._worker
        if worker is None:
            return None
        self._worker = None
        if self._ending is not None:
            self._ending.detach()
            self._ending = None
        return worker.end(kill)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()  # the parent's may be held by a thread not in this process
        self._forget()

    def _forget(self) -> None:
        """Drops the parent's worker in a process forked from it (`_Worker.forget`)."""
        worker = self._worker
        if worker is not None:
            self._worker = None
            if self._ending is not None:
                self._ending.detach()
                self._ending = None
            worker.forget()

    def _exchange(self, worker: _Worker, request: bytes) -> RenderOutcome:
        """Sends the request and reads its answer, ending the worker when it overran or died."""
        try:
            answer = self._ask(worker, request)
        except _Stopped as stopped:
            self._end(kill=True)
            return OverLimit(stopped.limit)
        except BaseException:
            # The worker gone (BrokenPipeError), or the parent interrupted while waiting (a
            # KeyboardInterrupt, the runtime's own timeout): the worker goes, as a late answer would
            # be read as the next request's.
            self._end(kill=True)
            raise
        if answer is None:  # dead without a whole answer
            status = self._end(kill=False)
            if (
                status is not None
                and os.WIFSIGNALED(status)
                and os.WTERMSIG(status) in (signal.SIGALRM, signal.SIGKILL)
            ):
                return OverLimit("time")
            return OverLimit("memory")
        try:
            outcome = msgspec.msgpack.decode(answer, type=_Answer).outcome()
        except msgspec.DecodeError:
            outcome = None
        if outcome is None or outcome == OverLimit("memory"):
            self._end(kill=True)  # it exits after this answer (or said nothing that makes sense)
            return OverLimit("memory")
        return outcome

    def _ask(self, worker: _Worker, request: bytes) -> bytes | None:
        """The answer to the request, or None when the worker closed its pipe first."""
        deadline = time.monotonic() + self._seconds + MARGIN_SECONDS
        _send(worker.requests, request, deadline)
        header = _receive(worker.answers, _LENGTH_BYTES, deadline)
        if header is None:
            return None
        length = int.from_bytes(header, "big")
        if length > 4 * self._output_characters + _ENVELOPE_BYTES:
            raise _Stopped("output")
        return _receive(worker.answers, length, deadline)

    @staticmethod
    def _fork() -> int:
        with warnings.catch_warnings():
            # Python 3.12+ warns when a process with threads forks: a child may find a lock held by a
            # thread that is not there. The worker takes no such lock (the module says why).
            warnings.filterwarnings(
                "ignore", message=r"This process \(pid=\d+\) is multi-threaded", category=DeprecationWarning
            )
            return os.fork()

    def _serve(self, requests: int, answers: int) -> NoReturn:
        """The worker: renders each request until its request pipe ends; never returns."""
        status = 1
        try:
            gc.disable()
            gc.freeze()  # the parent's objects, out of the collector's reach for good
            gc.enable()
            _close_all_but(requests, answers)
            # The kernel's default action, not a handler the parent set (a test runner's timeout).
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            limit = _virtual_size() + self._memory_bytes
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            if hard != resource.RLIM_INFINITY:
                limit = min(limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            self._compiled = jinja.CompiledContents()  # within the memory bound, as every render
            while True:
                header = _read_exactly(requests, _LENGTH_BYTES)
                if header is None:
                    break  # the parent closed the renderer, or is gone
                signal.setitimer(signal.ITIMER_REAL, self._seconds)
                payload = _read_exactly(requests, int.from_bytes(header, "big"))
                if payload is None:
                    break
                answer = self._render(payload)
                _write_all(answers, _framed(msgspec.msgpack.encode(answer)))
                signal.setitimer(signal.ITIMER_REAL, 0)
                if answer.over == OverLimit("memory"):
                    break
            status = 0
        finally:
            os._exit(status)

    def _render(self, payload: bytes) -> _Answer:
        try:
            request = msgspec.msgpack.decode(payload, type=_Request, ext_hook=_ext_as_int)
            return _answer(self._compiled.render(request.content, request.data, self._output_characters))
        except MemoryError:
            return _Answer(over=OverLimit("memory"))
        except jinja.UnrenderableSource as error:
            return _Answer(invalid=str(error))


def _send(fd: int, message: bytes, deadline: float) -> None:
    """Writes the whole message to a non-blocking pipe, or raises _Stopped("time") at the deadline
    (BrokenPipeError when no worker reads it: Python ignores SIGPIPE)."""
    poller = select.poll()  # poll, not select(): no limit on the descriptor's number
    poller.register(fd, select.POLLOUT)
    view = memoryview(message)
    while view:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Stopped("time")
        if not poller.poll(remaining * 1000):
            continue
        with contextlib.suppress(BlockingIOError):
            view = view[os.write(fd, view) :]


def _receive(fd: int, size: int, deadline: float) -> bytes | None:
    """Exactly `size` bytes, never more; None at end of file first; _Stopped("time") at the deadline."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    while size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Stopped("time")
        if not poller.poll(remaining * 1000):
            continue
        chunk = os.read(fd, min(size, _CHUNK))
        if not chunk:  # every write end closed: the worker is gone or going
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_exactly(fd: int, size: int) -> bytes | None:
    """The worker's read: exactly `size` bytes, blocking; None at end of file first."""
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, _CHUNK))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view) :]


def _close_all_but(*keep: int) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor is closed by now
                os.close(fd)


def _virtual_size() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")
