"""Destination rules: where a workspace's sms (and iMessage to a phone number) may go.

A phone recipient is refused when its country, as `phonenumbers` places the number, is outside the
workspace's countries (none listed: all), or when `phonenumbers` classifies it premium-rate or
shared-cost and the workspace does not allow those: the numbers sms pumping inflates traffic to. A
number `phonenumbers` places in no country is outside any list. Decided from the number alone,
before anything is written, so a refusal stores nothing and costs no call.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from msgspec import Struct


class Refused(StrEnum):
    """Why a destination is refused: `details.reason` of its `destination_not_allowed`."""

    COUNTRY = "country_not_allowed"
    PREMIUM_RATE = "premium_rate"
    SHARED_COST = "shared_cost"


class DestinationRules(Struct, frozen=True):
    countries: frozenset[str] = frozenset()  # ISO 3166 alpha-2; empty: every country
    allow_premium_numbers: bool = False

    def refusal(self, addresses: Iterable[str]) -> Refused | None:
        """Why a message of a phone channel (sms, iMessage) to `addresses` (normalised) may not go;
        None when it may. An address with an @ is an Apple ID's email address, no phone's."""
        for address in addresses:
            if "@" not in address:
                refused = self._refusal(address)
                if refused is not None:
                    return refused
        return None

    def _refusal(self, e164: str) -> Refused | None:
        import phonenumbers  # noqa: PLC0415  # loaded on first use, as the recipients' normalisation does

        try:
            number = phonenumbers.parse(e164, None)
        except phonenumbers.NumberParseException:
            return Refused.COUNTRY if self.countries else None
        if self.countries and phonenumbers.region_code_for_number(number) not in self.countries:
            return Refused.COUNTRY
        if not self.allow_premium_numbers:
            kind = phonenumbers.number_type(number)
            if kind == phonenumbers.PhoneNumberType.PREMIUM_RATE:
                return Refused.PREMIUM_RATE
            if kind == phonenumbers.PhoneNumberType.SHARED_COST:
                return Refused.SHARED_COST
        return None
