"""Spoken requests, as Whisper writes them, made to look like typed ones before routing.

A transcript has hesitations ("um so like"), false starts ("what's uh what's on"), numbers
in words ("twenty three") and often no punctuation. The router's classifier learned from
typed text, where none of that occurs, and hesitations read as small talk to it: an "um"
in front of a hard task pulls it towards chat. `normalise` removes or rewrites them so a
spoken request and its typed twin embed alike. Only routing reads the result; the text
handed on to the engine keeps the person's own words.

Each rule rewrites only what it matches, so typed text comes through unchanged apart from
numbers in words and a conversational opener ("Okay so ...").
"""

from __future__ import annotations

import re
from collections.abc import Callable

FILLERS = frozenset("um umm ummm uh uhh uhhh uhm erm hmm hmmm hm mm mmm mhm".split())
"""Hesitation sounds: meaningless wherever they stand. ("er" and "ah" are left out: in typed
text they are words, as in "the ER".)"""

# Words that open a spoken request ("okay so ...", "hey assistant ..."). Only at the very
# start are they fillers; elsewhere they can be content ("do you know", "so that").
OPENERS = (
    r"(?:hey|hi|hello|ok(?:ay)?)\s+assistant|hey|hi|hello|ok(?:ay)?|so|well|alright"
    r"|all\s+right|right|now|yeah|yes|oh|actually|basically|like|you\s+know(?:\s+what)?"
    r"|i\s+mean"
)
_END = r"(?![\w'-])"  # a whole word: not "umbrella", not "like-minded"
# With the comma after it: "data, uh, write" keeps one comma, "Um, what" none.
_FILLER_WORD = re.compile(
    r"\b(?:" + "|".join(sorted(FILLERS, key=len, reverse=True)) + ")" + _END + "[,.]*",
    re.IGNORECASE,
)
_FILLER = re.compile(r"\s*" + _FILLER_WORD.pattern, re.IGNORECASE)
_SEPARATORS = " \t\n,.!:;-\u2013\u2014"
_LEAD = re.compile(r"^(?:(?:" + OPENERS + ")" + _END + r"[\s,.!:;-]*)+", re.IGNORECASE)
_MIN_AFTER_LEAD = 3
"""Words that must remain for an opener to go: "Hi there!" is a greeting, not "there!"."""
# "like" as a hedge ("for like forty users", "and like rollback steps"): after these words
# it is almost never the verb or the preposition ("I'd like", "looks like", "what's it like").
_HEDGE_LIKE = re.compile(
    r"\b(so|and|just|or|for|by|at|got|is|was|are|were|be|been|took|takes|about|with|of|need)"
    r"\s+like" + _END + ",?",
    re.IGNORECASE,
)
# "you know" as a filler: set off by commas, at the end, or mid-sentence unless it is the
# verb of a question or clause ("do you know", "if you know", "you know how to ...").
_KNOW_VERB_AFTER = (
    "do did does don't didn't doesn't if as would will can could should might may what how "
    "whether that let so i we they you when where why who because"
).split()
_KNOW_OBJECT = (
    "that how what where why who when if whether it him her them me us this about of anyone "
    "someone somebody anything everything nothing more better best much"
).split()
_YOU_KNOW = re.compile(
    r",\s*you\s+know\s*,|\s*,?\s+you\s+know\s*$|"
    + "".join(rf"(?<!\b{w})" for w in _KNOW_VERB_AFTER)
    + r"\s+you\s+know"
    + _END
    + rf"(?!\s+(?:{'|'.join(_KNOW_OBJECT)})\b),?",
    re.IGNORECASE,
)
# A word or two said twice ("the the", "what's what's"); the filler between is gone by then.
# Within a line only: repeated lines in pasted text (a log) are content.
_REPEAT = re.compile(r"\b(\w[\w']*(?:[ \t]+\w[\w']*)?)(?:[ \t]*,)?[ \t]+\1" + _END, re.IGNORECASE)

_UNITS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {
    w: 10 * i
    for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)
}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_NUMBER_WORD = "|".join(sorted([*_UNITS, *_TENS, *_SCALES], key=len, reverse=True))
_DIGIT_WORD = "|".join(w for w, n in _UNITS.items() if n < 10)
# A run of number words, joined by spaces, hyphens or "and", with an optional spoken decimal
# part; it may hold several numbers ("ten fifteen and twenty"): `_numbers` splits them.
_NUMBER_RUN = re.compile(
    rf"\b(?:{_NUMBER_WORD})(?:(?:\s+and\s+|\s+|-)(?:{_NUMBER_WORD}))*{_END}"
    rf"(?:\s+point(?:\s+(?:{_DIGIT_WORD}){_END})+)?",
    re.IGNORECASE,
)


MAX_CHARS = 4000
"""Longer than a few minutes of speech: typed or pasted, so left as it is (and the cost of
routing a pasted page stays bounded)."""


def normalise(text: str) -> str:
    """The request with hesitations, a spoken opener, hedging "like"s and repeated words
    removed and numbers in words written as digits."""
    if len(text) > MAX_CHARS:
        return text
    out = _FILLER.sub("", text).strip()
    rest = _LEAD.sub("", out)
    if len(rest.split()) >= _MIN_AFTER_LEAD:
        out = rest
    out = _HEDGE_LIKE.sub(r"\1", out)
    out = _YOU_KNOW.sub("", out)
    out = _fixpoint(out, lambda s: _REPEAT.sub(_once, s))
    out = _NUMBER_RUN.sub(lambda m: " ".join(_numbers(re.findall(r"[\w']+|-", m[0]))), out)
    # "um" alone, or "Okay." said alone: the request is then the words as said.
    return out.strip(" ,") or text.strip()


def strip_fillers(text: str) -> str:
    """`text` without the hesitations at its start, the rest untouched: the task after a
    cue ("delegate this um write the spec") then starts with its first real word."""
    while True:
        text = text.lstrip(_SEPARATORS)
        m = _FILLER_WORD.match(text)
        if not m:
            return text
        text = text[m.end() :]


def _fixpoint(text: str, step: Callable[[str], str]) -> str:
    while (nxt := step(text)) != text:
        text = nxt
    return text


def _once(m: re.Match[str]) -> str:
    # Numbers said twice are two numbers ("twenty twenty" is a year).
    return m[0] if _kind(m[1].split()[0])[0] else m[1]


def _numbers(words: list[str]) -> list[str]:
    """Number words as digits, as typed text writes them: "two thousand" -> "2,000",
    "three hundred and twenty" -> "320", "five point seven" -> "5.7", "nineteen eighty
    four" -> "1984". A lone "one" or "zero" stays a word ("this one", "no one")."""
    out: list[str] = []
    i = 0
    while i < len(words):
        value, end = _read_number(words, i)
        text = _format(value)
        # A year is said as two pairs: "nineteen eighty four", "twenty twenty"
        year, year_end = _read_number(words, end)
        if end - i == 1 and 11 <= value <= 20 and 10 <= year <= 99 and year_end - end <= 2:
            text, end = str(value * 100 + year), year_end
        # "five point seven": the decimal part is said digit by digit
        k = end + 1
        while end > i and k < len(words) and words[end].lower() == "point" and _unit(words[k]):
            k += 1
        if k > end + 1:
            text += "." + "".join(str(_UNITS[w.lower()]) for w in words[end + 1 : k])
            end = k
        if end == i or (end == i + 1 and words[i].lower() in ("one", "zero")):
            text, end = words[i], i + 1
        out.append(text)
        i = end
    return out


# Which kind of number word may follow which, as numbers are said: "twenty five",
# "three hundred and twenty", "two thousand". Anything else starts a new number
# ("ten fifteen" is two) or ends it.
_NEXT = {
    "": {"unit", "teen", "tens"},
    "unit": {"hundred", "big"},
    "teen": {"hundred", "big"},
    "tens": {"unit", "hundred", "big"},
    "hundred": {"unit", "teen", "tens", "big"},
    "big": {"unit", "teen", "tens", "hundred"},
}


def _read_number(words: list[str], i: int) -> tuple[int, int]:
    """(value, index after the number) for the number words starting at `i`; (0, i) when
    there are none."""
    total = current = 0
    last = ""
    j = end = i
    while j < len(words):
        kind, n = _kind(words[j])
        if kind not in _NEXT[last] or (last == "tens" and kind == "unit" and n == 0):
            # "and" or a hyphen joins parts of one number: "hundred and twenty", "twenty-five"
            joins = {"and": ("hundred", "big"), "-": ("tens",)}.get(words[j].lower(), ())
            if last in joins and j + 1 < len(words):
                nkind, _ = _kind(words[j + 1])
                if nkind in ("unit", "teen", "tens") and nkind in _NEXT[last]:
                    j += 1
                    continue
            break
        if kind == "hundred":
            current = max(current, 1) * 100
        elif kind == "big":
            total += max(current, 1) * n
            current = 0
        else:
            current += n
        last = kind
        j += 1
        end = j
    return total + current, end


def _unit(word: str) -> bool:
    return _kind(word)[0] == "unit"


def _kind(word: str) -> tuple[str, int]:
    """("unit" 0-9, "teen" 10-19, "tens", "hundred", "big", or "" for no number word)."""
    w = word.lower()
    if w in _UNITS:
        n = _UNITS[w]
        return ("unit" if n < 10 else "teen"), n
    if w in _TENS:
        return "tens", _TENS[w]
    if w in _SCALES:
        return ("hundred" if w == "hundred" else "big"), _SCALES[w]
    return "", 0


def _format(n: int) -> str:
    """As typed text writes numbers: "2,000", "40 million"."""
    for scale, name in ((10**9, "billion"), (10**6, "million")):
        if n >= scale and n % scale == 0:
            return f"{n // scale:,} {name}"
    return f"{n:,}"
