"""sendonce_local: scheduled functions."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path

from sendonce_local.lambda_runtime import LocalFunction
from sendonce_local.schedules import ScheduleRunner, cron_next_run, next_run_function, rate_seconds
from sendonce_local.template import parse_template


def test_rate_expressions() -> None:
    assert rate_seconds("rate(1 minute)") == 60
    assert rate_seconds("rate(5 minutes)") == 300
    assert rate_seconds("rate(2 hours)") == 7200
    assert rate_seconds("cron(0 12 * * ? *)") is None


def test_cron_next_run() -> None:
    noon = cron_next_run("cron(0 12 * * ? *)")
    assert noon(datetime(2030, 1, 1, 11, 59, tzinfo=UTC)) == datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    assert noon(datetime(2030, 1, 1, 12, 0, tzinfo=UTC)) == datetime(2030, 1, 2, 12, 0, tzinfo=UTC)
    mondays = cron_next_run("cron(15 10 ? * MON *)")
    assert mondays(datetime(2030, 1, 1, tzinfo=UTC)) == datetime(2030, 1, 7, 10, 15, tzinfo=UTC)  # a Monday


def test_at_runs_once() -> None:
    once = next_run_function("at(2030-01-01T00:00:00)")
    assert once(datetime(2029, 12, 31, tzinfo=UTC)) == datetime(2030, 1, 1, tzinfo=UTC)
    assert once(datetime(2030, 1, 1, tzinfo=UTC)) is None


def test_a_scheduled_function_gets_an_eventbridge_event(tmp_path: Path) -> None:
    (tmp_path / "fn").mkdir()
    (tmp_path / "fn" / "app.py").write_text(
        "import json, os\n"
        "def handler(event, context):\n"
        "    open(os.path.join(os.path.dirname(__file__), 'seen.json'), 'w').write(json.dumps(event))\n"
    )
    template = parse_template(
        {
            "Resources": {
                "Sweep": {
                    "Type": "AWS::Serverless::Function",
                    "Properties": {
                        "CodeUri": "fn/",
                        "Handler": "app.handler",
                        "Events": {
                            "Tick": {"Type": "Schedule", "Properties": {"Schedule": "rate(1 minute)"}}
                        },
                    },
                }
            }
        },
        tmp_path,
    )
    [schedule] = template.schedules
    runner = ScheduleRunner(schedule, LocalFunction(template.functions["Sweep"]), threading.Event())

    runner.fire(datetime(2030, 1, 1, tzinfo=UTC))

    seen = json.loads((tmp_path / "fn" / "seen.json").read_text())
    assert seen["detail-type"] == "Scheduled Event"
    assert seen["source"] == "aws.events"
    assert seen["time"] == "2030-01-01T00:00:00Z"
    assert seen["resources"] == ["arn:aws:events:us-east-1:123456789012:rule/SweepTick"]
