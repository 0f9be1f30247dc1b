"""Final-answer extraction from model output (:data:`ANSWER_SOURCES`), and the forms used for grading.

:data:`TRAINING_SOURCES` takes only an answer the model marked as final (an output cut off at the length limit earns
nothing); :data:`EVALUATION_SOURCES` is the paper's evaluation rule. :func:`grading_form` normalises as a MATH grader
does (Hendrycks' ``strip_string``, Minerva's ``normalize_final_answer``). Pure Python, linear in the output's length.
"""

from __future__ import annotations

import re
from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

ANSWER_SOURCES = ("boxed", "answer_sentence", "answer_is", "last_number")
TRAINING_SOURCES = ("boxed", "answer_sentence")
EVALUATION_SOURCES = ("boxed", "answer_is", "last_number")

# A box command not followed by a letter (\boxedsomething is another command).
_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![^\W\d_])")
_BRACE = re.compile(r"[{}]")
_WHITESPACE_RUN = re.compile(r"\s+")
_SEPARATOR = re.compile(r"[,;]")
_BARE_ARGUMENT = re.compile(r"[^\s$]*")
_ANSWER_PHRASE = re.compile(r"the\s+(?:final\s+)?answer\s+is\s*:?\s*", re.IGNORECASE)
# A finished answer sentence: X, then a period that ends the sentence (not a decimal point), or a line break.
_SENTENCE_END = re.compile(r"\.(?=\$?(?:\s|$))|\n")
# 1,234.5 / -3 / 0.25 / 7/8 ; thousands separators only in groups of three.
_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])-?\d+(?:\.\d+)?(?:\s*/\s*\d+)?")
_TEXT_COMMANDS = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_SPACING = re.compile(r"\\[,;:! ]|\\quad|\\qquad")

# --- grading_form: what a MATH grader strips -------------------------------------------------------
# Thousands separators written in LaTeX: 10{,}000, 10,\!000, 10\,000, 10~000.
_LATEX_THOUSANDS = re.compile(r"(?<=\d)(?:\{,\}|,\\!|\\,|\\!|~|\\ )(?=\d{3}(?!\d))")
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d|,\d)")
_LEFT_RIGHT = re.compile(r"\\(?:left|right)(?![A-Za-z])")
# "3 and 5", "3 \text{ or } 5", "3,\ \text{and}\ 5": separators between the parts of an answer.
_PART_WORDS = re.compile(r"\s*,?\s*(?:\\[ ,;]\s*)*\\(?:text|mbox|textrm)\s*\{\s*(?:and|or)\s*\}(?:\s*\\[ ,;])*\s*|\s+(?:and|or)\s+")
_PERCENT_DEGREES = re.compile(r"\\\\%|\\%|%|\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|°|\\degree")
# A unit written as text after a value: 54 \text{ square centimeters}, 5\,\mathrm{~cm}^2, 3 \mbox{ inches}.
_UNIT_TEXT = re.compile(
    r"\s*(?:\\[,;! ]\s*)*\\(?:text|textrm|mbox|mathrm)\s*\{(?P<unit>[~\s]*[A-Za-z][A-Za-z~\s./-]*)\}"
    r"(?:\s*\^\s*\{?[23]\}?)?\s*$"
)
# A unit as plain words after a number: 10 dollars, 54 square centimeters, 60 km/h.
_UNIT_WORDS = re.compile(r"(?<=[\d}])\s+(?P<unit>[A-Za-z]{2,}(?:[\s/-]+[A-Za-z]+)*)\.?(?:\s*\^\s*\{?[23]\}?)?\s*$")
# Words after a number that are mathematics, not units ("2 pi", "3 and 4" is handled before).
_NOT_UNITS = frozenset(["pi", "sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "log",
                       "ln", "exp", "mod", "and", "or", "infinity", "inf"])
# Single letters that are constants, not units, in \mathrm{e} / \text{i}.
_CONSTANT_LETTERS = frozenset({"e", "i"})
# "x = 5", "k=2": a left side of at most two characters is dropped, as in Hendrycks' strip_string.
_SHORT_LEFT_SIDE = re.compile(r"^\s*[^=<>]{1,2}?\s*=(?!=)\s*")


@dataclass(frozen=True)
class Extraction:
    """The extracted answer (None when nothing was found) and the source it came from."""

    answer: str | None
    source: str  # one of ANSWER_SOURCES, or "none"


def _matching_braces(text: str) -> array:
    """For each index of ``text``: the index of the ``}`` closing the ``{`` there, or -1. One pass and
    8 bytes a character, whatever the nesting (a degenerate output of a million braces included)."""
    closing = array("q", [-1]) * len(text)
    open_at = array("q")
    for match in _BRACE.finditer(text):
        position = match.start()
        if text[position] == "{":
            open_at.append(position)
        elif open_at:
            closing[open_at.pop()] = position
    return closing


def _stripped_span(text: str, start: int, end: int) -> tuple[int, int]:
    """``text[start:end]`` without leading and trailing whitespace, as indices."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _boxed_occurrences(text: str) -> list[str | None]:
    """Every ``\\boxed`` / ``\\fbox`` not inside another one, in order of appearance: its content, stripped (a box
    that holds only a box is unwrapped), or None when it is unclosed or has no argument (the output was
    cut off inside it). ``\\boxed 5`` counts as ``\\boxed{5}``. Linear in ``len(text)`` (boxes unwrapped through the
    brace table)."""
    closing = _matching_braces(text) if _BOX_COMMAND.search(text) else array("q")
    outer: list[str | None] = []
    covered_to = -1
    for match in _BOX_COMMAND.finditer(text):
        start, after = match.start(), match.end()
        if start < covered_to:
            continue  # inside the previous box
        brace = after
        while brace < len(text) and text[brace].isspace():
            brace += 1
        content: tuple[int, int] | None = None
        end = after
        if brace < len(text) and text[brace] == "{":
            close = closing[brace]
            content = None if close < 0 else (brace + 1, close)
            end = len(text) if close < 0 else close + 1
        elif text[after : after + 1] == " " and brace < len(text):
            # "\boxed 5": the argument runs to the next space or math delimiter.
            content = (brace, _BARE_ARGUMENT.match(text, brace).end())
        covered_to = end
        while content is not None:  # a box that is the whole of this content is unwrapped
            first, last = _stripped_span(text, *content)
            inner = _BOX_COMMAND.match(text, first, last)
            if inner is None or inner.end() >= last or text[inner.end()] != "{" or closing[inner.end()] != last - 1:
                break
            content = inner.end() + 1, last - 1
        outer.append(None if content is None else text[first:last])
    return outer


def last_boxed(text: str, parts: int = 1) -> str | None:
    """The final boxed answer: the last box, if it is closed and not empty, else None. With
    ``parts`` > 1 and a last box of fewer parts, the last boxes joined (", ") until they have
    ``parts`` parts, when they add up exactly."""
    occurrences = _boxed_occurrences(text)
    last = occurrences[-1] if occurrences else None
    if not last or parts <= 1 or len(answer_parts(grading_form(last))) >= parts:
        return last or None
    joined: list[str] = []
    count = 0
    for content in reversed(occurrences):
        if not content:
            break
        joined.insert(0, content)
        count += len(answer_parts(grading_form(content)))
        if count >= parts:
            break
    return ", ".join(joined) if count == parts else last


def _strip_math_delimiters(answer: str) -> str:
    """``answer`` without the math delimiters that enclose the whole of it (``$3$``, ``\\[x\\]``)."""
    answer = answer.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if answer.startswith(left) and answer.endswith(right) and len(answer) >= len(left) + len(right):
            answer = answer[len(left) : len(answer) - len(right)].strip()
    return answer


def without_math_delimiters(text: str) -> str:
    """``text`` with every math delimiter removed (``$``, ``$$``, ``\\(``, ``\\)``, ``\\[``, ``\\]``);
    an escaped ``\\$`` (a currency sign) stays. ``$3$, $-2$`` becomes ``3, -2``."""
    text = re.sub(r"(?<!\\)\$", "", text)
    return re.sub(r"(?<!\\)\\[()\[\]]", "", text).strip()


def _answer_phrase(text: str, finished: bool) -> str | None:
    """The answer after the last "The answer is": to the end of its line, or (``finished``) of its sentence, None
    when that sentence is not finished."""
    # The last match kept alone: a list of every match (tens of thousands in a degenerate output) made the garbage
    # collector's passes, whose cost grows with everything the process holds, dominate the call.
    phrase = deque(_ANSWER_PHRASE.finditer(text), maxlen=1)
    if not phrase:
        return None
    rest = text[phrase[0].end() :]
    if finished:
        end = _SENTENCE_END.search(rest)
        if end is None:
            return None
        answer = rest[: end.start()]
    else:
        answer = rest.split("\n", 1)[0]
    # Trailing periods and spaces, scanned from the end (an end-anchored regex retries from every
    # position: quadratic on a long run of " .").
    cut = len(answer)
    while cut and (answer[cut - 1] == "." or answer[cut - 1].isspace()):
        cut -= 1
    return _strip_math_delimiters(answer[:cut]).rstrip(".").strip() or None


def _last_number(text: str) -> str | None:
    numbers = _NUMBER.findall(text)
    return _WHITESPACE_RUN.sub("", numbers[-1]).replace(",", "") if numbers else None


_EXTRACTORS = {
    "boxed": last_boxed,
    "answer_sentence": lambda text, parts: _answer_phrase(text, finished=True),
    "answer_is": lambda text, parts: _answer_phrase(text, finished=False),
    "last_number": lambda text, parts: _last_number(text),
}


def check_answer_sources(answer_sources: Sequence[str]) -> tuple[str, ...]:
    """``answer_sources`` as a tuple; ValueError unless it is a non-empty list of ANSWER_SOURCES."""
    sources = tuple(answer_sources)
    if not sources or any(source not in ANSWER_SOURCES for source in sources):
        raise ValueError(f"reward_kwargs.answer_sources={list(sources)!r} is invalid: use a non-empty list of "
                         f"{', '.join(ANSWER_SOURCES)}")
    return sources


def extract_answer(text: str, sources: Sequence[str] = EVALUATION_SOURCES, parts: int = 1) -> Extraction:
    """The final answer of a model output, trying ``sources`` in order (names from ANSWER_SOURCES).
    ``parts`` is the number of parts of the reference answer (see :func:`last_boxed`)."""
    for source in check_answer_sources(sources):
        answer = _EXTRACTORS[source](text, parts)
        if answer:
            return Extraction(answer, source)
    return Extraction(None, "none")


def _with_depth(pattern: re.Pattern, text: str) -> Iterator[tuple[re.Match, int]]:
    """Each match of ``pattern`` (which holds no bracket) with the bracket depth before it (a closer below 0 is
    ignored), in one left-to-right pass: the depth is carried from one match to the next, never recounted."""
    depth, scanned = 0, 0
    for match in pattern.finditer(text):
        for char in text[scanned : match.start()]:
            if char in "([{":
                depth += 1
            elif char in ")]}":
                depth = max(0, depth - 1)
        scanned = match.end()
        yield match, depth


def _join_thousands(text: str) -> str:
    """Plain thousands separators dropped outside brackets: 1,000 / 12,345.5 / "1,000, 2,000". A
    comma followed by exactly three digits continues a number of 1-3 leading digits (so "1,2,3" stays
    a list, and "100,200" reads as 100200, as MATH graders read it); inside brackets "(1,000)" stays."""
    pieces: list[str] = []
    scanned = 0
    for match, depth in _with_depth(_THOUSANDS, text):
        pieces += [text[scanned : match.start()], match.group(0).replace(",", "") if depth == 0 else match.group(0)]
        scanned = match.end()
    pieces.append(text[scanned:])
    return "".join(pieces)


def _top_level_split(text: str) -> list[str]:
    """``text`` split at commas and semicolons outside brackets and braces."""
    parts: list[str] = []
    start = 0
    for match, depth in _with_depth(_SEPARATOR, text):
        if depth == 0:
            parts.append(text[start : match.start()].strip())
            start = match.end()
    return [*parts, text[start:].strip()]


def _strip_units(part: str) -> str:
    """A part without a trailing unit (as text or plain words), percent or degree signs."""
    part = _PERCENT_DEGREES.sub("", part).strip()
    while True:
        match = _UNIT_TEXT.search(part)
        if not match or not part[: match.start()].strip():
            break
        unit = match.group("unit").replace("~", " ").strip()
        if unit.lower() in _CONSTANT_LETTERS or unit.lower() in _NOT_UNITS:
            break
        part = part[: match.start()].rstrip()
    match = _UNIT_WORDS.search(part)
    if match and part[: match.start()].strip():
        words = re.split(r"[\s/-]+", match.group("unit").lower())
        if not any(word in _NOT_UNITS for word in words):
            part = part[: match.start()].rstrip()
    return part


def grading_form(answer: str) -> str:
    """``answer`` as a MATH grader compares it (see the module docstring): currency ``\\$`` and math
    delimiters removed, trailing period dropped, LaTeX thousands separators joined, "and"/"or"
    between parts as commas, and in each part: units, percent and degree signs removed and a short
    "x =" left side dropped. Parts are re-joined with ", " (thousands commas are gone by then)."""
    text = answer.replace("\\$", "")
    text = without_math_delimiters(text)
    text = _LEFT_RIGHT.sub("", text)
    text = _LATEX_THOUSANDS.sub("", text)
    text = text.replace("\\!", "")
    text = _join_thousands(text)
    # Runs of whitespace as one space first: _PART_WORDS' nested \s* would otherwise backtrack
    # cubically through a long run.
    text = _PART_WORDS.sub(", ", _WHITESPACE_RUN.sub(" ", text))
    text = text.strip().rstrip(".").strip()
    parts = []
    for part in _top_level_split(text):
        part = _strip_units(part)
        part = _SHORT_LEFT_SIDE.sub("", part) if part.count("=") == 1 else part
        if part:
            parts.append(part.strip())
    return ", ".join(parts)


def answer_parts(form: str) -> list[str]:
    """The parts of an answer in grading form: "3, -2" has two, "(1, 2)" and "[1, 3)" one."""
    return [part for part in _top_level_split(form) if part]


def _normalize_part(part: str) -> str:
    text = part.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = _SPACING.sub("", text)
    previous = None
    while previous != text:
        previous, text = text, _TEXT_COMMANDS.sub(r"\1", text)
    text = _WHITESPACE_RUN.sub("", text.replace("\\circ", "")).rstrip(".")
    # One pair of braces around the whole answer: "{12}" is "12".
    while len(text) > 2 and text[0] == "{" and _matching_braces(text)[0] == len(text) - 1:
        text = text[1:-1]
    return text.lower()


def normalize_answer(answer: str) -> str:
    """A canonical string for the fallback comparison: the grading form, then without spacing or
    text wrappers, ``\\dfrac``/``\\tfrac`` as ``\\frac``, lower case; several parts in sorted order
    (an answer of several values is a set; a tuple is one part)."""
    parts = sorted(_normalize_part(part) for part in answer_parts(grading_form(answer)))
    return ",".join(parts)


def gold_from_boxed_solution(solution: str) -> str:
    """The reference answer of a MATH-style worked solution: its last ``\\boxed{}``."""
    answer = last_boxed(solution)
    if answer is None:
        raise ValueError(f"solution has no complete \\boxed{{}} answer: {solution[-200:]!r}")
    return answer


def gold_from_gsm8k(answer: str) -> str:
    """The reference answer of a GSM8K ``answer`` field: the number after ``####``, without commas."""
    if "####" not in answer:
        raise ValueError(f"GSM8K answer has no '####' final line: {answer[-200:]!r}")
    final = answer.rsplit("####", 1)[1].strip().replace(",", "")
    if not final:
        raise ValueError(f"GSM8K answer is empty after '####': {answer[-200:]!r}")
    return final
