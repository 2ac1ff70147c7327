"""The templates' renderer, each render in a forked child bounded in time, memory and output.

The invariant: the function survives any template; nothing a template does outlives its child.

A content is checked and parsed in this process (bounded by the source's size: see `jinja`); it is
compiled and rendered in a child forked for it alone, which:
- ends at `seconds` by its own SIGALRM (`setitimer`, default action: the kernel ends it even in the
  middle of one long C call, `'x' * 10**8`);
- may not grow past its size at fork plus `memory_bytes` (RLIMIT_AS): past it an allocation fails,
  MemoryError, and the child answers OverLimit("memory");
- stops rendering past `output_characters` (`jinja.render_parsed`);
- writes its outcome, msgpack-encoded, to a pipe and `_exit`s: no atexit handler, no buffer flushed.

The parent reads the pipe until a deadline (`seconds` and a margin), reads at most what the largest
answer can be, SIGKILLs a child that is overdue or says too much, always reaps it (`waitpid`), and
closes both ends of the pipe on every path. A child that died without a whole answer was ended by
its clock (SIGALRM) or by the parent (SIGKILL): OverLimit("time"); any other death (a failed
allocation outside Python's reach, a crash) is taken to be memory: OverLimit("memory").

The child takes no lock another thread may hold: the source is parsed before the fork (the lexer's
cache has a lock), and compiling a tree and rendering it import nothing not yet imported, log nothing
and open nothing; the child's cyclic collector is off, so no finalizer of the parent's garbage (a
buffered file, a connection) runs twice.
"""

from __future__ import annotations

import gc
import os
import resource
import select
import signal
import time
import warnings
from collections.abc import Mapping
from typing import Any, NoReturn

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

# How long after the child's own clock the parent waits before it kills it: the child's SIGALRM
# ends it first unless something is badly wrong.
MARGIN_SECONDS = 0.25
# What an answer may take besides its text, which is at most 4 bytes a character in UTF-8.
_ENVELOPE_BYTES = 64 * 1024
_CHUNK = 64 * 1024


class _Answer(Struct, frozen=True, omit_defaults=True):
    """The child's outcome, one field set: the outcomes are untagged Structs, so they go in an envelope."""

    rendered: Rendered | None = None
    missing: MissingData | None = None
    over: OverLimit | None = None
    forbidden: Forbidden | None = None
    # A content that does not compile (never checked): raised again in the parent.
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


def _virtual_size() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        pages = int(statm.read().split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view) :]


class ForkedRenderer:
    """`Renderer`: `check` in process, `render` in a forked child (the module says how)."""

    def __init__(
        self,
        seconds: float = RENDER_SECONDS,
        output_characters: int = OUTPUT_CHARACTERS,
        memory_bytes: int = 128 * 2**20,
    ) -> None:
        self._seconds = seconds
        self._output_characters = output_characters
        self._memory_bytes = memory_bytes

    def check(self, content: TemplateContent) -> list[InvalidSource]:
        return jinja.check(content)

    def render(self, content: TemplateContent, data: Mapping[str, Any]) -> RenderOutcome:
        """Raises `jinja.UnrenderableSource` for a content that does not parse or compile (`check` it
        first)."""
        parsed = jinja.parse(content)
        if isinstance(parsed, Forbidden):
            return parsed
        read_end, write_end = os.pipe()
        try:
            try:
                pid = self._fork()
                if pid == 0:
                    self._child(read_end, write_end, parsed, data)
            finally:
                os.close(write_end)  # the parent's copy (the child never comes back here)
            return self._await(read_end, pid)
        finally:
            os.close(read_end)

    @staticmethod
    def _fork() -> int:
        with warnings.catch_warnings():
            # Python 3.12+ warns when a process with threads forks: a child may find a lock held by a
            # thread that is not there. This child takes no such lock (the module says why), and
            # _exits without running anything of the parent's.
            warnings.filterwarnings(
                "ignore", message=r"This process \(pid=\d+\) is multi-threaded", category=DeprecationWarning
            )
            return os.fork()

    def _child(
        self, read_end: int, write_end: int, parsed: jinja.Parsed, data: Mapping[str, Any]
    ) -> NoReturn:
        status = 1
        try:
            gc.disable()
            os.close(read_end)
            # The kernel's default action, not a handler the parent set (a test runner's timeout).
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.setitimer(signal.ITIMER_REAL, self._seconds)
            limit = _virtual_size() + self._memory_bytes
            _, hard = resource.getrlimit(resource.RLIMIT_AS)
            if hard != resource.RLIM_INFINITY:
                limit = min(limit, hard)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            answer: _Answer
            try:
                answer = _answer(jinja.render_parsed(parsed, data, self._output_characters))
            except MemoryError:
                answer = _Answer(over=OverLimit("memory"))
            except jinja.UnrenderableSource as error:
                answer = _Answer(invalid=str(error))
            _write_all(write_end, msgspec.msgpack.encode(answer))
            status = 0
        finally:
            os._exit(status)

    def _await(self, read_end: int, pid: int) -> RenderOutcome:
        try:
            stopped, answer = self._read(read_end)
        except BaseException:
            # Interrupted while waiting (a KeyboardInterrupt, the runtime's own timeout): the child
            # goes with it.
            os.kill(pid, signal.SIGKILL)
            self._reap(pid)
            raise
        if stopped is not None:
            os.kill(pid, signal.SIGKILL)  # not yet reaped, so the pid is still the child's
        status = self._reap(pid)
        if stopped is not None:
            return stopped
        try:
            outcome = msgspec.msgpack.decode(answer, type=_Answer).outcome()
        except msgspec.DecodeError:
            outcome = None  # none, or cut off mid-answer
        if outcome is not None:
            return outcome
        if (
            status is not None
            and os.WIFSIGNALED(status)
            and os.WTERMSIG(status) in (signal.SIGALRM, signal.SIGKILL)
        ):
            return OverLimit("time")
        return OverLimit("memory")

    def _read(self, read_end: int) -> tuple[OverLimit | None, bytes]:
        """What the child wrote until it closed the pipe, or why it was not waited for."""
        deadline = time.monotonic() + self._seconds + MARGIN_SECONDS
        cap = 4 * self._output_characters + _ENVELOPE_BYTES
        poller = select.poll()  # poll, not select(): no limit on the descriptor's number
        poller.register(read_end, select.POLLIN)
        chunks: list[bytes] = []
        size = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return OverLimit("time"), b""
            if not poller.poll(remaining * 1000):
                continue
            chunk = os.read(read_end, _CHUNK)
            if not chunk:  # every write end closed: the child is gone or going
                return None, b"".join(chunks)
            size += len(chunk)
            if size > cap:
                return OverLimit("output"), b""
            chunks.append(chunk)

    @staticmethod
    def _reap(pid: int) -> int | None:
        # After EOF the child is exiting; if it closed the pipe and lives on, its own SIGALRM ends it.
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:  # reaped by someone else (SIGCHLD ignored): no status to read
            return None
