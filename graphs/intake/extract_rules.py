"""The offline model's field extraction: raw values found in a user's text,
by fixed rules, in this order of precedence (a span one rule used is blanked
out so later rules do not reuse it):

1. explicit labels, `name: value` / `party size = 4` (any case, `_` or space);
2. an email address → the first email field;
3. an ISO date (2025-06-01) → the asked date field, else the first unfilled
   date field; then a written date ("3 March", "March 3rd, 2026"; without a
   year, the next such day from today) the same way;
4. a phone number (+44 20 7946 0958; 7+ digits) → the first string field
   about a phone, unless a number is what was asked;
5. enum options, as whole words in any case (leftmost, longest first);
6. a name introduced as such ("my name is Ada Lovelace", "I'm Ada") → the
   first string field about a name;
7. counted numbers: "4 people" → the integer field that mentions people (or
   whose name/description has that word), "we are 4", "party of 4" → the
   integer field about people;
8. the field last asked for takes what is left: a number, yes/no, a
   date-like token, an @-token, or (string/enum) the whole message.

Every rule runs in time linear in the text (16,000 characters at most) and
the form (bounded by form_spec): patterns start only at word boundaries, and
enum options are matched with one pass over the text's words through a word
trie, not one regex alternation per field.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

_EMAIL_RE = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_ISO_DATE_RE = re.compile(r"(?<![0-9])[0-9]{4}-[0-9]{2}-[0-9]{2}(?![0-9])")
# Catches malformed dates (31/12/2024) so validation can reject them out loud.
_DATE_LIKE_RE = re.compile(r"(?<![0-9])[0-9]{1,4}[-/.][0-9]{1,2}[-/.][0-9]{1,4}(?![0-9])")
_NUMBER_RE = re.compile(r"(?<![\w.])[-+]?[0-9]+(?:\.[0-9]+)?(?![\w])")
_BOOLEAN_RE = re.compile(r"(?<!\w)(yes|no|true|false)(?!\w)", re.IGNORECASE)
_AT_TOKEN_RE = re.compile(r"(?<!\S)\S*@\S*")
_WORD_RE = re.compile(r"\w+")

_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WRITTEN_DATE_RE = re.compile(
    rf"(?<!\w)(?:(?P<d1>[0-9]{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<m1>{_MONTH})\.?"
    rf"|(?P<m2>{_MONTH})\.?\s+(?P<d2>[0-9]{{1,2}})(?:st|nd|rd|th)?)"
    rf"(?:,?\s+(?P<year>[0-9]{{4}}))?(?!\w)",
    re.IGNORECASE,
)
# Separators and digits are disjoint, so this never backtracks badly.
_PHONE_RE = re.compile(r"(?<![\w+])\+?[0-9](?:[ ().-]{0,2}[0-9]){6,19}(?![\w])")
_NAME_INTRO_RE = re.compile(
    r"(?<!\w)(?i:my\s+name\s+is|my\s+name's|i\s+am|i'm|i’m|this\s+is|call\s+me)"
    r"\s+(?P<name>[A-Z][\w'’-]*(?:[ \t]+[A-Z][\w'’-]*){0,4})"
)
_COUNT_RE = re.compile(r"(?<![\w.])(?P<n>[0-9]{1,6})\s+(?P<unit>[A-Za-z]+)(?!\w)")
_GROUP_RE = re.compile(
    r"(?<!\w)(?i:we\s+are|we're|we’re|party\s+of|table\s+for|group\s+of)\s+(?P<n>[0-9]{1,6})(?![\w.])"
)
# Longer options are left to the asked-field rule: it bounds the trie walk
# from each word of the text (a real option is a word or three).
MAX_OPTION_WORDS = 12
_PEOPLE_WORDS = frozenset({"people", "person", "persons", "guests", "guest", "party", "adults", "pax"})


def extract_values(
    form: list[dict[str, Any]],
    fields: dict[str, Any],
    asked_field: str | None,
    text: str,
    *,
    today: dt.date | None = None,
) -> dict[str, str]:
    found: dict[str, str] = {}
    rest = _take_explicit(form, text, found)
    asked = next((spec for spec in form if spec["name"] == asked_field), None)

    def first(kind: str, *, unfilled: bool = False, about: frozenset[str] | None = None) -> str | None:
        for spec in form:
            name = spec["name"]
            if spec["type"] != kind or name in found:
                continue
            if unfilled and fields.get(name) is not None:
                continue
            if about is not None and not (about & _words_of(spec)):
                continue
            return name
        return None

    rest = _take(_EMAIL_RE, rest, found, first("email"))

    def date_target() -> str | None:
        if asked and asked["type"] == "date" and asked["name"] not in found:
            return asked["name"]
        return first("date", unfilled=True)

    rest = _take(_ISO_DATE_RE, rest, found, date_target())
    target = date_target()
    if target is not None:
        match = _WRITTEN_DATE_RE.search(rest)
        if match is not None:
            found[target] = _written_date(match, today or dt.date.today())
            rest = _blank(rest, match.start(), match.end())
    if not (asked and asked["type"] in {"integer", "number"}):
        rest = _take_phone(rest, found, first("string", about=frozenset({"phone", "telephone", "mobile"})))
    rest = _take_enums(form, rest, found)
    rest = _take_name(rest, found, first("string", about=frozenset({"name"})))
    rest = _take_counts(form, rest, found)
    if asked is not None and asked["name"] not in found:
        _take_asked(asked, rest, text, found)
    return found


def _words_of(spec: dict[str, Any]) -> frozenset[str]:
    words = spec["name"].lower().split("_") + _WORD_RE.findall((spec.get("description") or "").lower())
    return frozenset(words)


def _take_explicit(form: list[dict[str, Any]], text: str, found: dict[str, str]) -> str:
    names = sorted((spec["name"] for spec in form), key=len, reverse=True)
    labels = "|".join(re.escape(name).replace("_", "[_ ]") for name in names)
    # Field names are short identifiers (form_spec), and matches start only
    # at word boundaries: linear in the text.
    matches = list(re.finditer(rf"(?<!\w)(?P<label>{labels})\s*[:=]\s*", text, re.IGNORECASE))
    rest = text
    for index, match in enumerate(matches):
        segment_end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        cut = re.search(r"[\n;]", text[match.end() : segment_end])
        value_end = match.end() + cut.start() if cut else segment_end
        value = text[match.end() : value_end].strip().rstrip(",.").strip()
        name = match["label"].lower().replace(" ", "_")
        if value and name not in found:
            found[name] = value
        rest = _blank(rest, match.start(), value_end)
    return rest


def _take(pattern: re.Pattern[str], rest: str, found: dict[str, str], target: str | None) -> str:
    if target is None:
        return rest
    match = pattern.search(rest)
    if match is None:
        return rest
    found[target] = match.group(0)
    return _blank(rest, match.start(), match.end())


def _written_date(match: re.Match[str], today: dt.date) -> str:
    day = int(match["d1"] or match["d2"])
    month = _MONTHS[(match["m1"] or match["m2"]).lower()]
    if match["year"]:
        year = int(match["year"])
    else:
        year = today.year
        try:
            if dt.date(year, month, day) < today:
                year += 1
        except ValueError:
            pass  # not a real day: validation says so, whatever the year
    return f"{year:04d}-{month:02d}-{day:02d}"


def _fold(text: str) -> str:
    """Lower case, one character for one, so positions in the folded text
    are positions in the original."""
    low = text.lower()
    # No character lowers to nothing, so equal lengths mean one for one.
    if len(low) == len(text):
        return low
    return "".join(low if len(low := ch.lower()) == 1 else ch for ch in text)


def _take_enums(form: list[dict[str, Any]], rest: str, found: dict[str, str]) -> str:
    """Enum options as whole words: one left-to-right pass over the text's
    words, walking a trie of every open enum field's options (as word
    sequences) from each word. At a position the longest option wins; an
    option two fields share goes to the first in form order."""
    # Word by word; the None key holds the options that end at that word.
    trie: dict[str | None, Any] = {}
    for order, spec in enumerate(form):
        if spec["type"] != "enum" or spec["name"] in found:
            continue
        for option in spec.get("enum") or ():
            folded = _fold(option)
            words = _WORD_RE.findall(folded)
            # An option must start and end with a word character to be
            # found as a whole word; others are left to the asked-field rule.
            if not words or len(words) > MAX_OPTION_WORDS or not (folded[0].isalnum() or folded[0] == "_"):
                continue
            node = trie
            for word in words:
                node = node.setdefault(word, {})
            node.setdefault(None, []).append((order, spec["name"], option, folded))
    if not trie:
        return rest
    folded_rest = _fold(rest)
    words = [(m.start(), m.end(), m.group(0)) for m in _WORD_RE.finditer(folded_rest)]
    index = 0
    while index < len(words):
        start = words[index][0]
        best: tuple[int, str, str, int] | None = None  # (end, name, option, next index)
        node = trie
        step = index
        while step < len(words) and words[step][2] in node:
            node = node[words[step][2]]
            step += 1
            for _order, name, option, folded in sorted(node.get(None, ())):
                end = start + len(folded)
                if name in found or folded_rest[start:end] != folded:
                    continue
                if end < len(folded_rest) and (folded_rest[end].isalnum() or folded_rest[end] == "_"):
                    continue
                if best is None or end > best[0]:
                    best = (end, name, option, step)
                break
        if best is None:
            index += 1
            continue
        end, name, _option, index = best
        found[name] = rest[start:end]
        rest = _blank(rest, start, end)
        folded_rest = _blank(folded_rest, start, end)
    return rest


def _take_phone(rest: str, found: dict[str, str], target: str | None) -> str:
    if target is None:
        return rest
    for match in _PHONE_RE.finditer(rest):
        number = match.group(0)
        if sum(c.isdigit() for c in number) >= 7 and not _DATE_LIKE_RE.fullmatch(number):
            found[target] = number
            return _blank(rest, match.start(), match.end())
    return rest


def _take_name(rest: str, found: dict[str, str], target: str | None) -> str:
    if target is None:
        return rest
    match = _NAME_INTRO_RE.search(rest)
    if match is None:
        return rest
    found[target] = match["name"]
    return _blank(rest, match.start("name"), match.end("name"))


def _take_counts(form: list[dict[str, Any]], rest: str, found: dict[str, str]) -> str:
    integers = [spec for spec in form if spec["type"] == "integer"]
    if not integers:
        return rest
    about = {spec["name"]: _words_of(spec) for spec in integers}
    for match in list(_COUNT_RE.finditer(rest)):
        unit = match["unit"].lower()
        for spec in integers:
            words = about[spec["name"]]
            people = unit in _PEOPLE_WORDS and words & _PEOPLE_WORDS
            if spec["name"] not in found and (unit in words or unit.rstrip("s") in words or people):
                found[spec["name"]] = match["n"]
                rest = _blank(rest, match.start("n"), match.end("n"))
                break
    group = _GROUP_RE.search(rest)
    if group is not None:
        for spec in integers:
            if spec["name"] not in found and about[spec["name"]] & _PEOPLE_WORDS:
                found[spec["name"]] = group["n"]
                rest = _blank(rest, group.start("n"), group.end("n"))
                break
    return rest


def _take_asked(asked: dict[str, Any], rest: str, text: str, found: dict[str, str]) -> None:
    kind = asked["type"]
    patterns = {
        "integer": _NUMBER_RE,
        "number": _NUMBER_RE,
        "boolean": _BOOLEAN_RE,
        "date": _DATE_LIKE_RE,
        "email": _AT_TOKEN_RE,
    }
    if kind in patterns:
        _take(patterns[kind], rest, found, asked["name"])
    elif not found and text.strip():
        # string and enum: a bare answer is the whole message.
        found[asked["name"]] = text.strip()


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]
