"""The simulator as a provider: the only one a test message can reach, and an honest one.

It plays the recipient table (`recipients`) with real state, in the stack's own DynamoDB, so a
retry meets what a real provider would have left: the transient number really fails its first two
calls (counted per message), and the lost-answer number really records its delivery before losing
the answer. Like the HTTP provider, it honours the Idempotency-Key (the message id): a call whose
key it accepted before is answered as the first was, and delivers nothing new, so the dispatcher's
retry of a lost answer leaves one delivery. What happened next (delivered, a bounce, an opt-out) it
reports as a provider reports it, as provider events on the events queue, each with an id derived
from the message, so that a report made again is applied once.

It refuses a live message outright: a live message "delivered" here would never reach its recipient.
"""

from __future__ import annotations

from sendonce.clock import Clock, rfc3339, utc_now
from sendonce.errors import AmbiguousOutcome, DependencyUnavailable, PermanentFailure, TransientFailure
from sendonce.messages.model import Message, MessageFailure
from sendonce.modes import Mode
from sendonce.observability import logger
from sendonce.provider_events.model import SIMULATOR, ProviderEvent, ProviderEventType
from sendonce.provider_events.ports import EventQueue
from sendonce.simulator.ports import SimulatedDelivery, SimulatorStore
from sendonce.simulator.recipients import TRANSIENT_FAILURES, Behaviour, deciding
from sendonce.suppressions.model import Reason

NAME = SIMULATOR
# A report follows the call it is about, as a provider's webhook follows its answer: the dispatcher
# has usually recorded the call's outcome by then.
REPORT_DELAY_SECONDS = 1
# What SES reports of the mailbox simulator's bounce address.
BOUNCE = MessageFailure("bounced", "Permanent: General")


class Simulator:
    name = NAME
    honours_idempotency_key = True

    def __init__(self, store: SimulatorStore, events: EventQueue, clock: Clock = utc_now) -> None:
        self._store = store
        self._events = events
        self._clock = clock

    def send(self, message: Message) -> str:
        try:
            return self._send(message)
        except DependencyUnavailable as failure:
            # Its records could not be read or written: as a provider that is down, tried again later
            # (safe, with the Idempotency-Key, whether or not the write was made).
            raise TransientFailure(
                "provider_unavailable", f"the simulator is unavailable: {failure}"
            ) from None

    def _send(self, message: Message) -> str:
        if message.mode is not Mode.TEST:
            raise PermanentFailure("simulator_live_message", "the simulator takes test messages only")
        recipient, behaviour = deciding(message.recipients)
        now = self._clock()
        if behaviour is Behaviour.PERMANENT_FAILURE:
            raise PermanentFailure("provider_rejected", "the simulator refused the message (permanently)")
        if behaviour is Behaviour.TRANSIENT_TWICE:
            call = self._store.count_call(message.workspace_id, message.id, now)
            if call <= TRANSIENT_FAILURES:
                raise TransientFailure(
                    "provider_unavailable",
                    f"the simulator failed transiently (call {call} of {TRANSIENT_FAILURES} that fail)",
                )
        delivery, first = self._store.accept(
            SimulatedDelivery(
                workspace_id=message.workspace_id,
                message_id=message.id,
                channel=message.channel.value,
                to=message.to,
                subject=message.subject,
                body=message.body,
                at=now,
                provider_id=f"sim_{message.id}",
                idempotency_key=message.id,  # the HTTP provider's Idempotency-Key: the message id
                to_list=message.to_list,
                cc=message.cc,
                bcc=message.bcc,
            )
        )
        logger.info(
            "simulator.accepted" if first else "simulator.replayed",
            extra={
                "event": "simulator.accepted" if first else "simulator.replayed",
                "message_id": message.id,
                "behaviour": behaviour.value,
            },
        )
        # Reported again on a replay: a report lost the first time is made, and applied once.
        self._report(message, recipient, behaviour, delivery)
        if behaviour is Behaviour.LOST_ANSWER and first:
            raise AmbiguousOutcome("provider_timeout", "the provider did not answer in time")
        return delivery.provider_id

    def _report(
        self, message: Message, recipient: str, behaviour: Behaviour, delivery: SimulatedDelivery
    ) -> None:
        # As SES reports them: a permanent bounce fails the message and suppresses its recipient; a
        # complaint comes after the delivery and suppresses too (in the twin: the message's workspace).
        reports: list[tuple[str, ProviderEventType, MessageFailure | None, Reason | None]] = [
            ("failed", ProviderEventType.FAILED, BOUNCE, Reason.BOUNCED)
            if behaviour is Behaviour.SES_BOUNCE
            else ("delivered", ProviderEventType.DELIVERED, None, None)
        ]
        if behaviour is Behaviour.SES_COMPLAINT:
            reports.append(("complaint", ProviderEventType.DELIVERED, None, Reason.COMPLAINED))
        if behaviour is Behaviour.OPTS_OUT:
            reports.append(("opted_out", ProviderEventType.OPTED_OUT, None, None))
        for name, kind, error, suppress in reports:
            event = ProviderEvent(
                provider=NAME,
                event_id=f"{delivery.provider_id}_{name}",
                message_id=message.id,
                type=kind,
                occurred_at=rfc3339(delivery.at),
                error=error,
                suppress=suppress,
                # The recipient it is about: of an email to several, the one that bounced or complained.
                to=recipient if suppress is not None or kind is ProviderEventType.OPTED_OUT else None,
            )
            try:
                self._events.publish(event, delay_seconds=REPORT_DELAY_SECONDS)
            except DependencyUnavailable as failure:
                # A provider whose report is lost has still taken the message; a replay reports again.
                logger.warning(
                    "simulator.report_lost",
                    extra={"event": "simulator.report_lost", "message_id": message.id, "cause": str(failure)},
                )
