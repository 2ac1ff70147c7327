"""A function's imports run with the cyclic garbage collector paused, and what they built is then
frozen out of its reach: every function module imports inside `frozen_imports()`.

An import builds objects that live as long as the execution environment (modules, classes,
functions, models). As they pile up, the collector scans them again and again during the cold
start, and once more at every full collection after it, for nothing it could ever free: about 29 ms
of the API function's cold start on python3.13. Refcounting still frees whatever is dropped
meanwhile; the few cycles the imports leave behind (a few hundred objects after the API function's)
stay frozen with the rest. Paused without the freeze, the collector's first run after the imports
would scan them all anyway.

With Lambda SnapStart (the template's `SnapStart` parameter), many execution environments resume
from one snapshot taken after these imports, so whatever must be unique per environment is drawn
again after a restore, by Lambda's runtime hook (`snapshot_restore_py`, which the Python managed
runtimes include; absent elsewhere, where nothing is restored): `random`'s state (retry jitter,
quota and copy shards) and every composition root, so clients and their connections are built
afresh. A forked child (the local stack's fork server) is covered by the standard library's own
hook, `os.register_at_fork`, with which `random` reseeds itself; the roots are built after the
fork, on a first request, and reseed `random` again then (`sendonce.composition`).
"""

from __future__ import annotations

import gc
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


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


def after_restore() -> None:
    """What a SnapStart restore runs, in each resumed environment, before its first request."""
    from sendonce.composition import reset_all  # noqa: PLC0415 (a hook's, not the import's)

    random.seed()  # from the OS: no two resumed environments draw the same jitter or shards
    reset_all()  # nothing built before the snapshot is shared: clients, caches, leases


def register_restore_hook(hooks: Any = None) -> bool:
    """Register `after_restore` with Lambda's runtime hooks (`hooks`: the module
    `snapshot_restore_py`, found by import unless given). False where there is no such module."""
    if hooks is None:
        try:
            import snapshot_restore_py as hooks  # type: ignore[import-not-found, no-redef]  # noqa: PLC0415
        except ImportError:
            return False
    hooks.register_after_restore(after_restore)
    return True


register_restore_hook()
