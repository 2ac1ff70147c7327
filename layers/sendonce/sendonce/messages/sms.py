"""How an sms body travels: its encoding and its segments, by GSM 03.38; and smart encoding.

A body whose every character is in the GSM 7-bit default alphabet, or in its extension table, is
sent as GSM-7: a basic character is one septet, an extension character two (an escape and the
character). Any other character makes the whole body UCS-2, counted in UTF-16 code units (a
character outside the Basic Multilingual Plane is two). One segment holds 160 septets or 70 units;
a longer body is split in segments of 153 septets or 67 units (the rest of each is the header that
joins them), and a segment never splits an escape sequence or a surrogate pair.

Smart encoding replaces the characters that have a GSM-7 look-alike (curly quotes, long dashes,
unusual spaces, an ellipsis) and removes invisible ones, so a body that looked GSM-7 to its writer
is sent as GSM-7. It never changes a character that is GSM-7 already.
"""

from __future__ import annotations

from enum import StrEnum

from msgspec import Struct

# GSM 03.38's default alphabet, in code order (0x1B, the escape, is not a character of its own).
_BASIC = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
# Its extension table: each is sent as the escape and itself, two septets.
_EXTENSION = frozenset("\f^{}\\[~]|€")

SINGLE_GSM_SEPTETS = 160
PART_GSM_SEPTETS = 153
SINGLE_UCS2_UNITS = 70
PART_UCS2_UNITS = 67

# Look-alikes: what each becomes under smart encoding ("" removes it). Written as escapes: the
# characters themselves are the look-alikes, hard to tell from what they become.
_LOOK_ALIKES = {
    # single quotes, primes and the modifier apostrophe
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u2035\u02bc", "'"),
    # double quotes, double primes and guillemets
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u2036\u00ab\u00bb", '"'),
    # hyphens, figure dash, en and em dashes, horizontal bar, minus sign
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    # no-break, en, em, thin, hair and other spaces; the tab
    **dict.fromkeys(
        "\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000\t", " "
    ),
    # zero-width spaces and joiners, the word joiner, the byte order mark, the soft hyphen
    **dict.fromkeys("\u200b\u200c\u200d\u2060\ufeff\u00ad", ""),
    "\u2026": "...",  # horizontal ellipsis
    "\u2039": "<",  # single left-pointing angle quotation mark
    "\u203a": ">",  # single right-pointing angle quotation mark
    "\u02dc": "~",  # small tilde
    "\u02c6": "^",  # modifier letter circumflex
}
_SMART = str.maketrans(_LOOK_ALIKES)


class Encoding(StrEnum):
    GSM_7 = "GSM-7"
    UCS_2 = "UCS-2"


class SmsCount(Struct, frozen=True):
    """How a body is sent as sms: its encoding, its segments, and the characters that made it UCS-2
    (each once, in the order they first appear; none for GSM-7)."""

    encoding: Encoding
    segments: int
    non_gsm_characters: tuple[str, ...] = ()


def _segments(sizes: list[int], single: int, part: int) -> int:
    """Segments for characters of these sizes: one if they fit in `single`, else filled in order,
    `part` each, a character never split between two."""
    if sum(sizes) <= single:
        return 1
    segments, used = 1, 0
    for size in sizes:
        if used + size > part:
            segments, used = segments + 1, 0
        used += size
    return segments


def count(body: str) -> SmsCount:
    """The encoding and segments of `body` sent as sms."""
    outside = [c for c in dict.fromkeys(body) if c not in _BASIC and c not in _EXTENSION]
    if not outside:
        septets = [2 if c in _EXTENSION else 1 for c in body]
        return SmsCount(Encoding.GSM_7, _segments(septets, SINGLE_GSM_SEPTETS, PART_GSM_SEPTETS))
    units = [2 if ord(c) > 0xFFFF else 1 for c in body]
    return SmsCount(Encoding.UCS_2, _segments(units, SINGLE_UCS2_UNITS, PART_UCS2_UNITS), tuple(outside))


def smart_encoded(body: str) -> str:
    """`body` with each character that has a GSM-7 look-alike replaced by it (invisible ones removed)."""
    return body.translate(_SMART)
