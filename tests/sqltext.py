"""Statements of a SQL file, split the way PostgreSQL reads them (for static tests)."""

from __future__ import annotations

import re

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")


def statements(text: str) -> list[str]:
    """The top-level statements of a SQL text, each without its leading comments."""
    out: list[str] = []
    i, start, n = 0, 0, len(text)
    while i < n:
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            i = text.index("*/", i) + 2
        elif text[i] == "'":
            i = _string_end(text, i)
        elif text[i] == '"':
            i = text.index('"', i + 1) + 1
        elif text[i] == "$" and (found := _DOLLAR.match(text, i)) and not _in_word(text, i):
            i = text.index(found.group(0), found.end()) + len(found.group(0))
        elif text[i] == ";":
            out.append(text[start : i + 1])
            start = i = i + 1
        else:
            i += 1
    if text[start:].strip():
        out.append(text[start:])
    return [_strip_comments(s) for s in out if _strip_comments(s)]


def _in_word(text: str, i: int) -> bool:
    return i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")


def _string_end(text: str, i: int) -> int:
    escapes = i > 0 and text[i - 1] in "eE" and not _in_word(text, i - 1)
    j = i + 1
    while True:
        if escapes and text[j] == "\\":
            j += 2
        elif text[j] == "'":
            if text.startswith("''", j):
                j += 2
            else:
                return j + 1
        else:
            j += 1


def _strip_comments(statement: str) -> str:
    lines = statement.strip().splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("--")):
        lines.pop(0)
    return "\n".join(lines).strip()


def head(statement: str, words: int = 8) -> str:
    """The first words of a statement, upper-cased and on one line."""
    return " ".join(statement.split()[:words]).upper()


def without_strings(text: str) -> str:
    """The text with every string constant ('..', E'..', $tag$..$tag$) and comment blanked."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text[i] == "'":
            i = _string_end(text, i)
            out.append("''")
        elif text[i] == "$" and (found := _DOLLAR.match(text, i)) and not _in_word(text, i):
            i = text.index(found.group(0), found.end()) + len(found.group(0))
            out.append("''")
        else:
            out.append(text[i])
            i += 1
    return "".join(out)
