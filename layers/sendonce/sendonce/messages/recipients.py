"""Recipients, normalised: one human, one address, however the caller wrote it.

The normalised form is what is stored and returned; the dedup form is what the dedup guard
compares (an email's local part compared without ASCII case, as docs/api.md states).
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct

# An email's recipients in all (to, cc and bcc), counted after de-duplication.
MAX_RECIPIENTS = 50


class InvalidRecipient(ValueError):
    pass


class Recipient(Struct, frozen=True):
    address: str  # E.164 phone number, or an email address with its domain lower-cased
    dedup_form: str


def normalise_phone(raw: str) -> Recipient:
    import phonenumbers  # noqa: PLC0415  (loaded on first use: a large module kept off cold starts that never need it)

    try:
        number = phonenumbers.parse(raw, None)
    except phonenumbers.NumberParseException as error:
        raise InvalidRecipient(
            "must be a phone number with its country code, such as +15550100000"
        ) from error
    if not phonenumbers.is_possible_number(number):
        raise InvalidRecipient("is not a possible phone number")
    e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    return Recipient(address=e164, dedup_form=e164)


def normalise_email(raw: str) -> Recipient:
    from email_validator import EmailNotValidError, validate_email  # noqa: PLC0415

    try:
        checked = validate_email(raw, check_deliverability=False, test_environment=True)
    except EmailNotValidError as error:
        raise InvalidRecipient(f"is not a valid email address: {error}") from error
    address = checked.normalized
    return Recipient(address=address, dedup_form=ascii_lower(address))


def ascii_lower(text: str) -> str:
    """ASCII case folded, nothing else: `Ann@x.io` is `ann@x.io`, but `straße@x.io` is not `strasse@x.io`."""
    return text.translate(_ASCII_UPPER_TO_LOWER)


_ASCII_UPPER_TO_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def deduplicated(*fields: Sequence[Recipient]) -> tuple[tuple[Recipient, ...], ...]:
    """The fields (to, cc, bcc, in that order) with each recipient kept once, where it first appears:
    two addresses are one recipient when their dedup forms are (`Ann@x.io` and `ann@x.io`)."""
    seen: set[str] = set()
    kept: list[tuple[Recipient, ...]] = []
    for recipients in fields:
        field: list[Recipient] = []
        for recipient in recipients:
            if recipient.dedup_form not in seen:
                seen.add(recipient.dedup_form)
                field.append(recipient)
        kept.append(tuple(field))
    return tuple(kept)


def tie_destination(addresses: Sequence[str]) -> str | list[str]:
    """What an Idempotency-Key's tie names as the destination of a message to `addresses`
    (normalised): the address itself for one (the tie of every send before lists), else the set of
    their dedup forms (`idempotency.keys.tie_identity`)."""
    if len(addresses) == 1:
        return addresses[0]
    return [ascii_lower(address) for address in addresses]


def normalise_phone_or_email(raw: str) -> Recipient:
    """A phone number, or an email address (an iMessage Apple ID)."""
    return normalise_email(raw) if "@" in raw else normalise_phone(raw)
