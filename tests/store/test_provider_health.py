"""The providers' cool-off, shared by every execution environment, on every engine.

A provider that failed to accept `after` messages in a row, counted by any environments, is cooling
off for every one of them; the cool-off is started once, however many environments count the last
failure at once; an acceptance ends the run; the cool-off ends when its time is up.
"""

from __future__ import annotations

from datetime import timedelta

from tests.store.conftest import NOW, Engine, race

AFTER = 5
SECONDS = 60.0


def test_given_failures_counted_by_different_environments_then_every_one_sees_the_cool_off(
    engine: Engine,
) -> None:
    environments = [engine.provider_health(AFTER, SECONDS) for _ in range(3)]

    started = [environments[n % 3].not_accepted("twilio", NOW) for n in range(AFTER)]

    assert started == [False] * (AFTER - 1) + [True]
    for environment in environments:
        assert environment.cooling(["twilio", "http"], NOW + timedelta(seconds=1)) == {"twilio"}
        assert environment.cooling(["twilio"], NOW + timedelta(seconds=SECONDS + 1)) == frozenset()


def test_given_the_last_failure_counted_by_many_at_once_then_the_cool_off_starts_once(engine: Engine) -> None:
    answers = race(AFTER, lambda _: engine.provider_health(AFTER, SECONDS).not_accepted("twilio", NOW))

    assert sorted(map(repr, answers)) == sorted(["False"] * (AFTER - 1) + ["True"])
    assert engine.provider_health(AFTER, SECONDS).cooling(["twilio"], NOW) == {"twilio"}


def test_given_an_acceptance_between_failures_then_the_run_starts_again(engine: Engine) -> None:
    environment = engine.provider_health(AFTER, SECONDS)
    for _ in range(AFTER - 1):
        environment.not_accepted("twilio", NOW)

    environment.accepted("twilio", NOW)

    assert [environment.not_accepted("twilio", NOW) for _ in range(AFTER - 1)] == [False] * (AFTER - 1)
    assert environment.cooling(["twilio"], NOW) == frozenset()
    assert environment.not_accepted("twilio", NOW) is True


def test_a_provider_with_no_failures_is_never_cooling_and_its_acceptances_write_nothing(
    engine: Engine,
) -> None:
    environment = engine.provider_health(AFTER, SECONDS)
    before = engine.snapshot() if engine.name != "fake" else None

    environment.accepted("http", NOW)

    assert environment.cooling(["http"], NOW) == frozenset()
    if before is not None:
        assert engine.snapshot() == before
