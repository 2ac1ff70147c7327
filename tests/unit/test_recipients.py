"""Recipients: one human, one address, however the caller wrote it (docs/api.md, POST /v1/messages, `to`)."""

from __future__ import annotations

import pytest
from sendonce.channels import normalise_recipient
from sendonce.keyed_hash import KeyedHash, logged_recipient
from sendonce.messages.model import Channel
from sendonce.messages.recipients import InvalidRecipient, normalise_email, normalise_phone


@pytest.mark.parametrize(
    "written",
    ["+1 (555) 010-0000", "+15550100000", "+1 555 010 0000", "+1-555-010-0000", "+1.555.010.0000"],
)
def test_given_formatting_variants_of_one_phone_when_normalised_then_one_e164_number(written: str) -> None:
    recipient = normalise_phone(written)

    assert recipient.address == "+15550100000"
    assert recipient.dedup_form == "+15550100000"


def test_given_a_non_us_number_when_normalised_then_its_country_code_is_kept() -> None:
    assert normalise_phone("+44 20 7946 0958").address == "+442079460958"


@pytest.mark.parametrize(
    "written",
    ["5550100000", "555-010-0000", "not a number", "", "+", "+1 555", "+1 5550100000000000", "phone:+1555"],
)
def test_given_an_invalid_or_countryless_number_when_normalised_then_refused(written: str) -> None:
    with pytest.raises(InvalidRecipient):
        normalise_phone(written)


def test_given_an_email_with_an_upper_case_domain_when_normalised_then_the_domain_is_lower_cased() -> None:
    recipient = normalise_email("Ada.Lovelace@Example.COM")

    assert recipient.address == "Ada.Lovelace@example.com"  # the local part is kept as written


def test_given_email_case_variants_when_normalised_then_one_dedup_form() -> None:
    forms = {
        normalise_email(raw).dedup_form for raw in ("ada@example.com", "ADA@EXAMPLE.COM", "Ada@Example.com")
    }

    assert forms == {"ada@example.com"}


def test_given_two_different_mailboxes_when_normalised_then_two_dedup_forms() -> None:
    assert normalise_email("ada@example.com").dedup_form != normalise_email("bob@example.com").dedup_form


@pytest.mark.parametrize(
    "written", ["", "ada", "ada@", "@example.com", "ada@@example.com", "a b@example.com"]
)
def test_given_an_invalid_email_when_normalised_then_refused(written: str) -> None:
    with pytest.raises(InvalidRecipient):
        normalise_email(written)


def test_given_sms_when_an_email_is_the_recipient_then_refused() -> None:
    with pytest.raises(InvalidRecipient):
        normalise_recipient(Channel("sms"), "ada@example.com")


def test_given_email_when_a_phone_is_the_recipient_then_refused() -> None:
    with pytest.raises(InvalidRecipient):
        normalise_recipient(Channel("email"), "+15550100000")


@pytest.mark.parametrize(
    ("written", "address"),
    [("+1 (555) 010-0000", "+15550100000"), ("Ada@Example.COM", "Ada@example.com")],
)
def test_given_imessage_when_a_phone_or_an_email_is_the_recipient_then_either_is_normalised(
    written: str, address: str
) -> None:
    assert normalise_recipient(Channel("imessage"), written).address == address


def test_given_imessage_when_the_recipient_is_neither_then_refused() -> None:
    with pytest.raises(InvalidRecipient):
        normalise_recipient(Channel("imessage"), "ada")


def test_a_log_names_a_recipient_by_a_keyed_hash_that_only_the_key_recomputes() -> None:
    ours, another = KeyedHash(lambda: "one deployment's key"), KeyedHash(lambda: "another's")

    named = logged_recipient(ours, "ada@example.com")

    assert named == logged_recipient(ours, "ada@example.com")  # one person's lines found together
    assert named != logged_recipient(another, "ada@example.com")  # nobody without the key can
    assert named != logged_recipient(ours, "bob@example.com")
    assert "ada" not in named
    assert "example" not in named
    assert len(named) == 20


@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        ("Ann@x.io", "ann@x.io", True),
        ("ANN@X.IO", "ann@x.io", True),
        ("straße@x.io", "strasse@x.io", False),
        ("STRASSE@x.io", "strasse@x.io", True),
        ("Éva@x.io", "éva@x.io", False),  # only ASCII letters fold
    ],
)
def test_the_email_dedup_form_folds_ascii_case_only(one: str, other: str, same: bool) -> None:
    assert (normalise_email(one).dedup_form == normalise_email(other).dedup_form) is same
