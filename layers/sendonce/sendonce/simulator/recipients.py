"""The simulator's recipient table: what a test message to each recipient meets (README, "Test mode").

The one table there is: the dispatchers run it for every test message, deployed and in the local
stack alike (the same handlers, the same layer), so a test means the same thing in both. Recipients
are looked up in their normalised form (E.164; an address ignoring ASCII case), anything not in the
table is accepted and then delivered.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from types import MappingProxyType


class Behaviour(StrEnum):
    PERMANENT_FAILURE = "permanent_failure"  # refused: the message ends `failed`
    TRANSIENT_TWICE = "transient_twice"  # fails TRANSIENT_FAILURES times, then accepted
    LOST_ANSWER = "lost_answer"  # accepted and recorded, then the answer is lost (a timeout)
    OPTS_OUT = "opts_out"  # accepted, delivered, then the recipient opts out
    SES_SUCCESS = "ses_success"  # the SES mailbox simulator's addresses: delivered,
    SES_BOUNCE = "ses_bounce"  # a permanent bounce (the message ends `failed`),
    SES_COMPLAINT = "ses_complaint"  # delivered, then a complaint (a complaint never undoes `delivered`)
    DELIVERED = "delivered"  # anyone else: accepted, then delivered


TRANSIENT_FAILURES = 2

RECIPIENTS = MappingProxyType(
    {
        "+15005550001": Behaviour.PERMANENT_FAILURE,
        "+15005550002": Behaviour.TRANSIENT_TWICE,
        "+15005550003": Behaviour.LOST_ANSWER,
        "+15005550004": Behaviour.OPTS_OUT,
        "success@simulator.amazonses.com": Behaviour.SES_SUCCESS,
        "bounce@simulator.amazonses.com": Behaviour.SES_BOUNCE,
        "complaint@simulator.amazonses.com": Behaviour.SES_COMPLAINT,
    }
)


def behaviour_for(to: str) -> Behaviour:
    """What the simulator does with a message to `to` (normalised as the API stores it)."""
    key = to.lower() if "@" in to else to  # only ASCII letters differ in case in the table's addresses
    return RECIPIENTS.get(key, Behaviour.DELIVERED)


def deciding(recipients: Sequence[str]) -> tuple[str, Behaviour]:
    """Of a message's recipients (in the order to, cc, bcc), the one whose behaviour the message meets:
    the first in the table, else the first (an email to several is one call, so one behaviour)."""
    for to in recipients:
        behaviour = behaviour_for(to)
        if behaviour is not Behaviour.DELIVERED:
            return to, behaviour
    return recipients[0], Behaviour.DELIVERED
