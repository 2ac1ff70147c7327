"""Scheduled functions: `Schedule` / `ScheduleV2` events run on `rate(...)`, `cron(...)` or `at(...)`."""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sendonce_local.constants import ACCOUNT_ID, REGION
from sendonce_local.lambda_runtime import LocalFunction
from sendonce_local.template import ScheduleSpec

log = logging.getLogger("local-stack.schedule")

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_CRON = re.compile(r"^cron\((.+)\)$")
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_WEEKDAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]

NextRun = Callable[[datetime], datetime | None]


def rate_seconds(expression: str) -> int | None:
    match = _RATE.match(expression.strip())
    if not match:
        return None
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).rstrip("s")]


def _field(text: str, low: int, high: int, names: list[str] | None = None, offset: int = 0) -> set[int]:
    """The values an AWS cron field allows (`*`, `?`, lists, ranges, steps, names)."""
    values: set[int] = set()
    for item in text.upper().split(","):
        part = item
        for index, name in enumerate(names or []):
            part = part.replace(name, str(index + offset))
        step = 1
        if "/" in part:
            part, _, step_text = part.partition("/")
            step = int(step_text)
        if part in ("*", "?"):
            start, end = low, high
        elif "-" in part:
            start, end = (int(v) for v in part.split("-"))
        elif part.isdigit():
            start = int(part)
            end = high if step > 1 else start
        else:
            raise ValueError(f"unsupported cron field {text!r}")
        values.update(range(start, end + 1, step))
    return values


def cron_next_run(expression: str) -> NextRun:
    """A function giving the first time strictly after `now` that an AWS `cron(...)` matches (UTC)."""
    match = _CRON.match(expression.strip())
    if not match:
        raise ValueError(f"not a cron expression: {expression}")
    fields = match.group(1).split()
    if len(fields) != 6:
        raise ValueError(f"an AWS cron expression has 6 fields: {expression}")
    minutes = _field(fields[0], 0, 59)
    hours = _field(fields[1], 0, 23)
    days = _field(fields[2], 1, 31)
    months = _field(fields[3], 1, 12, _MONTHS, offset=1)
    weekdays = _field(fields[4], 1, 7, _WEEKDAYS, offset=1)  # 1 = Sunday
    years = _field(fields[5], 1970, 2199)
    any_day, any_weekday = fields[2] in ("*", "?"), fields[4] in ("*", "?")

    def next_run(now: datetime) -> datetime | None:
        candidate = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
        for _ in range(60 * 24 * 366 * 2):
            weekday = (candidate.isoweekday() % 7) + 1
            day_ok = (candidate.day in days or any_day) and (weekday in weekdays or any_weekday)
            if (
                candidate.minute in minutes
                and candidate.hour in hours
                and day_ok
                and candidate.month in months
                and candidate.year in years
            ):
                return candidate
            candidate += timedelta(minutes=1)
        return None

    return next_run


def next_run_function(expression: str) -> NextRun:
    seconds = rate_seconds(expression)
    if seconds is not None:
        return lambda now: now + timedelta(seconds=seconds)
    at = _AT.match(expression.strip())
    if at:
        when = datetime.fromisoformat(at.group(1)).replace(tzinfo=UTC)
        return lambda now: when if when > now else None
    return cron_next_run(expression)


def scheduled_event(schedule: ScheduleSpec, now: datetime) -> Any:
    """What EventBridge (or EventBridge Scheduler) passes the function: the `Input`, else its default."""
    if schedule.input is not None:
        return json.loads(schedule.input)
    name = f"{schedule.function_id}{schedule.event_name}"
    if schedule.kind == "ScheduleV2":
        source, resource = "aws.scheduler", f"arn:aws:scheduler:{REGION}:{ACCOUNT_ID}:schedule/default/{name}"
    else:
        source, resource = "aws.events", f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{name}"
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": source,
        "account": ACCOUNT_ID,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [resource],
        "detail": {},
    }


class ScheduleRunner:
    def __init__(self, schedule: ScheduleSpec, function: LocalFunction, stop: threading.Event) -> None:
        self._schedule = schedule
        self._function = function
        self._stop = stop
        self._next_run = next_run_function(schedule.expression)
        self._thread = threading.Thread(
            target=self._run, name=f"schedule-{schedule.function_id}-{schedule.event_name}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        due = self._next_run(datetime.now(UTC))
        while due is not None:
            if self._stop.wait(max(0.0, (due - datetime.now(UTC)).total_seconds())):
                return
            self.fire(due)
            due = self._next_run(due)

    def fire(self, now: datetime) -> None:
        try:
            self._function.invoke(scheduled_event(self._schedule, now))
            log.info("%s ran on %s", self._function.name, self._schedule.expression)
        except Exception:
            log.exception("%s RAISED on its schedule %s", self._function.name, self._schedule.expression)
