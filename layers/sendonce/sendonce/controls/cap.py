"""The frequency cap's arithmetic: never more than N new messages to one recipient within any
window of W seconds, decided by conditions a single write can check.

Time is cut into buckets of a tenth of the window (`BUCKETS`). A frame is `FRAME_BUCKETS` (eleven)
consecutive buckets, one starting at every bucket, so any window of W seconds lies inside one frame.
A new message in bucket k counts in the eleven frames that contain k (k-10 to k), and no frame may
ever hold more than N: then no window does. A message keeps its place until the last frame that
contains its bucket ends: at most a tenth of the window longer than a strict sliding window would.

One condition is enough: while no message has been counted in a bucket after k, frame k-10 holds
every message of buckets k-10 to k, and each later frame a part of them, so frame k-10 is the
fullest of the eleven. Whether a later bucket has messages is kept as the recipient's last bucket
(`last`), which every count moves on and which may not be past k: a writer whose clock is behind
another's meets it, and counts in that later bucket instead (refusing, if anything, a little
longer). So a create conditions `frame k-10 < N` and `last <= k`, adds one to each of the eleven
frames, and sets `last` to k.

A recipient's frames are kept `GROUP_FRAMES` to an item, so a message's eleven frames lie in one
item most of the time (in two when they straddle groups), each item expiring once its last frame
has ended.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from datetime import UTC, datetime

from msgspec import Struct
from msgspec.structs import replace

# A bucket is a tenth of the window: the longest a place outlives a strict sliding window.
BUCKETS = 10
FRAME_BUCKETS = BUCKETS + 1
# Frames an item holds: a message's eleven lie in one item in 56 of 66 buckets.
GROUP_FRAMES = 6 * FRAME_BUCKETS
MIN_WINDOW_SECONDS = 60
MAX_WINDOW_SECONDS = 30 * 24 * 3600
MAX_PER_RECIPIENT = 10_000
# Each recipient's count takes one or two items of the create's transaction (100 at most, six of
# them the message's own): under a cap, a message names at most this many recipients.
MAX_CAPPED_RECIPIENTS = 40


def check_cap(per_recipient: int, window_seconds: int) -> None:
    """ValueError unless a cap of `per_recipient` in `window_seconds` is one (0: no cap)."""
    if not 0 <= per_recipient <= MAX_PER_RECIPIENT:
        raise ValueError(f"the cap must be 0 (none) to {MAX_PER_RECIPIENT:,} messages, not {per_recipient}")
    if per_recipient and not MIN_WINDOW_SECONDS <= window_seconds <= MAX_WINDOW_SECONDS:
        raise ValueError(
            f"the cap's window must be {MIN_WINDOW_SECONDS} to {MAX_WINDOW_SECONDS:,} seconds, "
            f"not {window_seconds}"
        )


class CapFrames(Struct, frozen=True):
    """One recipient's frames a new message counts in that one item (`group`) holds."""

    recipient: str  # a digest of (workspace, recipient), never the address
    group: int
    frames: tuple[int, ...]
    fullest: int | None  # frame k-10, when this item holds it: the one conditioned on
    holds_last: bool  # this item holds frame k, and with it the recipient's last bucket
    expires_at: int  # epoch seconds: when the group's last frame has ended


class RecipientCap(Struct, frozen=True):
    """A workspace's cap in force for one new message: `limit` messages a `window_seconds`, counted
    in the bucket of `now`."""

    workspace_id: str
    recipients: tuple[str, ...]  # the recipients' keys (`recipient_key`)
    limit: int
    window_seconds: int
    now: datetime

    @property
    def bucket_ms(self) -> int:
        return self.window_seconds * 1000 // BUCKETS

    @property
    def bucket(self) -> int:
        return int(self.now.timestamp() * 1000) // self.bucket_ms

    def frames(self) -> list[CapFrames]:
        """The items a new message counts in: its bucket's frames, per recipient and group."""
        bucket = self.bucket
        groups: dict[int, list[int]] = {}
        for frame in range(bucket - BUCKETS, bucket + 1):
            groups.setdefault(frame // GROUP_FRAMES, []).append(frame)
        return [
            CapFrames(
                recipient_digest(self.workspace_id, recipient),
                group,
                tuple(in_group),
                bucket - BUCKETS if in_group[0] == bucket - BUCKETS else None,
                in_group[-1] == bucket,
                math.ceil(((group + 1) * GROUP_FRAMES + BUCKETS) * self.bucket_ms / 1000),
            )
            for recipient in self.recipients
            for group, in_group in sorted(groups.items())
        ]

    def in_bucket(self, bucket: int) -> RecipientCap:
        """This cap counted in a later `bucket` (another writer's clock was ahead): from its start."""
        start = datetime.fromtimestamp(bucket * self.bucket_ms / 1000, UTC)
        return replace(self, now=max(self.now, start))

    def retry_after(self, found: Mapping[int, int]) -> int:
        """Seconds until a message could take a place, given the frames a refused create found (by
        frame): the first bucket whose fullest frame has room, a frame not found taken as full. At
        least 1."""
        bucket = self.bucket
        free = next(
            (
                frame
                for frame in range(bucket - BUCKETS + 1, bucket + 1)
                if found.get(frame, self.limit) < self.limit
            ),
            bucket + 1,
        )
        free_at_ms = (free + BUCKETS) * self.bucket_ms
        return max(1, math.ceil((free_at_ms - self.now.timestamp() * 1000) / 1000))


def recipient_digest(workspace_id: str, recipient: str) -> str:
    """The cap's name for a recipient: a digest, so no counter key carries an address."""
    return hashlib.sha256(f"{workspace_id}\x00{recipient}".encode()).hexdigest()[:32]
