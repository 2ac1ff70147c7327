"""A function's imports run with the cyclic garbage collector paused, and what they built is then
frozen out of its reach: every function module imports inside `frozen_imports()`.

An import builds objects that live as long as the execution environment (modules, classes,
functions, models). As they pile up, the collector scans them again and again during the cold
start, and once more at every full collection after it, for nothing it could ever free: about 29 ms
of the API function's cold start on python3.13. Refcounting still frees whatever is dropped
meanwhile; the few cycles the imports leave behind (a few hundred objects after the API function's)
stay frozen with the rest. Paused without the freeze, the collector's first run after the imports
would scan them all anyway.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def frozen_imports() -> Iterator[None]:
    """Pause the collector while the block imports; then freeze everything alive (`gc.freeze`, the
    interpreter's permanent generation) and put the collector back as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
