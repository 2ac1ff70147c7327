"""Sends the handlers' stdout (structured logs, EMF metrics) to /dev/null while they are measured.

Powertools' logger holds the `sys.stdout` object it found at import, so this redirects the file
descriptor itself: the handlers still format and write every line, as they would on Lambda.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def silenced_stdout() -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
