"""Final-answer extraction from model output, and the normalised forms used for grading.

Where the final answer may come from (each an entry of :data:`ANSWER_SOURCES`):

- ``boxed``: the last ``\\boxed{}`` / ``\\fbox{}``. If the last one is unclosed (a truncated output)
  there is no boxed answer: an earlier box is not the model's last word. When the reference has
  several parts and the last box fewer, the last boxes are joined until they have as many parts
  ("x = \\boxed{3} or x = \\boxed{-2}" against "3, -2").
- ``answer_sentence``: a finished "The answer is X." sentence (a period, or a line break, after X).
- ``answer_is``: "The answer is X" to the end of its line, finished or not (the paper's evaluation).
- ``last_number``: the last number anywhere in the text (the paper's evaluation fallback).

Two rules are built from them. :data:`TRAINING_SOURCES` (boxed, answer_sentence) is the training
reward: it only takes an answer the model marked as final, so an output cut off at the length limit
("... Step 3: 14-") cannot earn a reward from a number that happens to sit at its end, and a policy
gains nothing by running into the limit. :data:`EVALUATION_SOURCES` (boxed, answer_is, last_number)
is the paper's evaluation rule, kept to reproduce its numbers.

:func:`grading_form` normalises an answer as a MATH grader does (Hendrycks' ``strip_string``,
Minerva's ``normalize_final_answer``) before math-verify and the string comparison see it: no
currency signs, math delimiters, unit words, percent or degree signs, thousands separators; "and"
between parts becomes a comma. Pure Python: no math-verify, no sympy.
"""

from __future__ import annotations

import re
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

ANSWER_SOURCES = ("boxed", "answer_sentence", "answer_is", "last_number")
TRAINING_SOURCES = ("boxed", "answer_sentence")
EVALUATION_SOURCES = ("boxed", "answer_is", "last_number")

# A box command not followed by a letter (\boxedsomething is another command).
_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![^\W\d_])")
_BRACE = re.compile(r"[{}]")
_WHITESPACE_RUN = re.compile(r"\s+")
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
_NOT_UNITS = frozenset(
    ["pi", "sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "log", "ln", "exp", "mod", "and", "or", "infinity", "inf"]
)
# Single letters that are constants, not units, in \mathrm{e} / \text{i}.
_CONSTANT_LETTERS = frozenset({"e", "i"})
# "x = 5", "k=2": a left side of at most two characters is dropped, as in Hendrycks' strip_string.
_SHORT_LEFT_SIDE = re.compile(r"^\s*[^=<>]{1,2}?\s*=(?!=)\s*")


@dataclass(frozen=True)
class Extraction:
    """The extracted answer (None when nothing was found) and the source it came from."""

    answer: str | None
    source: str  # one of ANSWER_SOURCES, or "none"


def _braced(text: str, open_at: int) -> tuple[str, int] | None:
    """Content of the brace group opening at ``open_at`` and the index after it; None if unbalanced."""
    depth = 0
    for position in range(open_at, len(text)):
        char = text[position]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : position], position + 1
    return None


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


def _box_spanning(text: str, closing: array, start: int, end: int) -> tuple[int, int] | None:
    """The content span of the box that is the whole of ``text[start:end]`` (``\\boxed{...}``), or None."""
    match = _BOX_COMMAND.match(text, start, end)
    if match is None or match.end() >= end or text[match.end()] != "{" or closing[match.end()] != end - 1:
        return None
    return match.end() + 1, end - 1


def _boxed_occurrences(text: str) -> list[str | None]:
    """Every ``\\boxed`` / ``\\fbox`` not inside another one, in order of appearance: its content (a box
    that holds only a box is unwrapped), or None when it is unclosed or has no argument (the output was
    cut off inside it). ``\\boxed 5`` counts as ``\\boxed{5}``.

    Linear in ``len(text)`` in time and memory: one scan for the commands, one for the braces, and
    each box unwrapped through the brace table, never by re-reading its content."""
    closing: array | None = None
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
            if closing is None:
                closing = _matching_braces(text)
            close = closing[brace]
            content = None if close < 0 else (brace + 1, close)
            end = len(text) if close < 0 else close + 1
        elif text[after : after + 1] == " " and brace < len(text):
            # "\boxed 5": the argument runs to the next space or math delimiter.
            content = (brace, _BARE_ARGUMENT.match(text, brace).end())
        covered_to = end
        while content is not None:
            first, last = _stripped_span(text, *content)
            if _BOX_COMMAND.match(text, first, last) is None:
                break
            if closing is None:
                closing = _matching_braces(text)
            inner = _box_spanning(text, closing, first, last)
            if inner is None:
                break
            content = inner
        outer.append(None if content is None else text[content[0] : content[1]])
    return outer


def last_boxed(text: str, parts: int = 1) -> str | None:
    """The final boxed answer: the last box, if it is closed and not empty, else None. With
    ``parts`` > 1 and a last box of fewer parts, the last boxes joined (", ") until they have
    ``parts`` parts, when they add up exactly."""
    occurrences = _boxed_occurrences(text)
    if not occurrences or occurrences[-1] is None or not occurrences[-1].strip():
        return None
    last = occurrences[-1].strip()
    if parts <= 1 or len(answer_parts(grading_form(last))) >= parts:
        return last
    joined: list[str] = []
    count = 0
    for content in reversed(occurrences):
        if content is None or not content.strip():
            break
        joined.insert(0, content.strip())
        count += len(answer_parts(grading_form(content)))
        if count >= parts:
            break
    return ", ".join(joined) if count == parts else last


def _strip_math_delimiters(answer: str) -> str:
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


def _last_answer_phrase(text: str) -> re.Match | None:
    # The last match kept alone: a list of every match (tens of thousands in a degenerate output) made the garbage
    # collector's passes, whose cost grows with everything the process holds, dominate the call.
    last = deque(_ANSWER_PHRASE.finditer(text), maxlen=1)
    return last[0] if last else None


def _clean_sentence_answer(answer: str) -> str | None:
    # Trailing periods and spaces, scanned from the end (an end-anchored regex retries from every
    # position: quadratic on a long run of " .").
    end = len(answer)
    while end and (answer[end - 1] == "." or answer[end - 1].isspace()):
        end -= 1
    answer = answer[:end].strip()
    answer = _strip_math_delimiters(answer).rstrip(".").strip()
    return answer or None


def _answer_is(text: str) -> str | None:
    phrase = _last_answer_phrase(text)
    if phrase is None:
        return None
    return _clean_sentence_answer(text[phrase.end() :].split("\n", 1)[0])


def _answer_sentence(text: str) -> str | None:
    """The answer of the last "The answer is ..." when that sentence is finished, else None."""
    phrase = _last_answer_phrase(text)
    if phrase is None:
        return None
    rest = text[phrase.end() :]
    end = _SENTENCE_END.search(rest)
    return _clean_sentence_answer(rest[: end.start()]) if end is not None else None


def _last_number(text: str) -> str | None:
    numbers = _NUMBER.findall(text)
    if not numbers:
        return None
    return re.sub(r"\s+", "", numbers[-1]).replace(",", "")


def extract_answer(text: str, sources: Sequence[str] = EVALUATION_SOURCES, parts: int = 1) -> Extraction:
    """The final answer of a model output, trying ``sources`` in order (names from ANSWER_SOURCES).
    ``parts`` is the number of parts of the reference answer (see :func:`last_boxed`)."""
    unknown = [source for source in sources if source not in ANSWER_SOURCES]
    if unknown:
        raise ValueError(f"unknown answer source(s) {unknown}; valid: {', '.join(ANSWER_SOURCES)}")
    for source in sources:
        if source == "boxed":
            answer = last_boxed(text, parts)
        elif source == "answer_sentence":
            answer = _answer_sentence(text)
        elif source == "answer_is":
            answer = _answer_is(text)
        else:
            answer = _last_number(text)
        if answer:
            return Extraction(answer, source)
    return Extraction(None, "none")


def _bracket_depth(text: str, start: int, end: int, depth: int) -> int:
    """The bracket depth after ``text[start:end]``, entered at ``depth`` (a closer below 0 is ignored)."""
    for char in text[start:end]:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
    return depth


def _join_thousands(text: str) -> str:
    """Plain thousands separators dropped outside brackets: 1,000 / 12,345.5 / "1,000, 2,000". A
    comma followed by exactly three digits continues a number of 1-3 leading digits (so "1,2,3" stays
    a list, and "100,200" reads as 100200, as MATH graders read it); inside brackets "(1,000)" stays."""

    # One left-to-right pass: the depth is carried from one number to the next, never recounted.
    pieces: list[str] = []
    depth, scanned = 0, 0
    for match in _THOUSANDS.finditer(text):
        depth = _bracket_depth(text, scanned, match.start(), depth)
        pieces += [text[scanned : match.start()], match.group(0).replace(",", "") if depth == 0 else match.group(0)]
        scanned = match.end()
    pieces.append(text[scanned:])
    return "".join(pieces)


def _top_level_split(text: str) -> list[str]:
    """``text`` split at commas and semicolons outside brackets and braces."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        if char in ",;" and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts]


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
    text = text.replace("\\circ", "")
    text = re.sub(r"\s+", "", text).rstrip(".")
    # One pair of braces around the whole answer: "{12}" is "12".
    while len(text) > 2 and text[0] == "{" and _braced(text, 0) == (text[1:-1], len(text)):
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
