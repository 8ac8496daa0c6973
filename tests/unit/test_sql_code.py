"""Static checks of the repeatable SQL code (sql/code/): rights and search_path of every
routine, stated next to it (no database needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.sqltext import head, statements, without_strings

CODE = Path(__file__).resolve().parents[2] / "sql" / "code"
ROUTINE = re.compile(r"^CREATE OR REPLACE (FUNCTION|PROCEDURE) (timers\.\w+)\(", re.I)
# Procedures that COMMIT cannot carry a SET clause: their bodies are schema-qualified calls.
COMMITTING = {"timers.run", "timers.advance_test_clock", "timers._fire_many"}
# What a body may call unqualified: SQL constructs that are not functions.
CONSTRUCTS = {
    "ARRAY",
    "CASE",
    "COALESCE",
    "GREATEST",
    "LEAST",
    "NULLIF",
    "VALUES",
    "IN",
    "ANY",
    "EXTRACT",
}


def _routines() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(CODE.glob("*.sql")):
        for statement in statements(path.read_text()):
            m = ROUTINE.match(statement)
            if m:
                found.append((path.name, m.group(2), statement))
    return found


def _body(statement: str) -> str:
    tag = re.search(r"\sAS\s+(\$[A-Za-z_]*\$)", statement)
    assert tag, statement[:80]
    start = tag.end()
    return statement[start : statement.index(tag.group(1), start)]


def test_there_are_routines() -> None:
    assert len(_routines()) > 150


@pytest.mark.parametrize("path", sorted(p.name for p in CODE.glob("*.sql")))
def test_every_routine_is_locked_down_in_its_own_file(path: str) -> None:
    """Each routine is named in a REVOKE ... FROM PUBLIC of the file that defines it."""
    text = (CODE / path).read_text()
    revokes = " ".join(s for s in statements(text) if head(s, 2) in ("REVOKE ALL",))
    for file, name, _ in _routines():
        if file == path:
            assert re.search(rf"{re.escape(name)}\(", revokes), f"{name} is not revoked"
            assert "FROM PUBLIC" in revokes


def test_every_routine_pins_its_search_path_or_needs_none() -> None:
    for file, name, statement in _routines():
        if "SET search_path = pg_catalog, pg_temp" in statement.split(" AS ", 1)[0]:
            continue
        if name in COMMITTING:
            continue
        # an inlinable SQL helper: no name it uses can be looked up in a user's schema
        assert "LANGUAGE sql" in statement, f"{file}: {name} has no SET search_path"
        body = without_strings(_body(statement))
        body = re.sub(r"OPERATOR\(pg_catalog\.[^)]+\)", " ", body)
        for call in re.findall(r"(?<![\w.:])(\w+)\(", body):
            assert call.upper() in CONSTRUCTS, f"{name} calls {call}() unqualified"
        leftover = re.sub(r"::\w+(\[\])?|\[|\]|[(),.;]", " ", body)
        assert not re.search(r"[-+*/<>=~!@#%^&|]", leftover), f"{name} uses a bare operator"


def test_the_settings_a_run_may_not_change_are_read_in_the_order_they_are_named() -> None:
    """timers._settings_now() writes out timers._guarded_settings()'s names (an inlined
    expression, not a query): the same names, in the same order."""
    bodies = {name: _body(statement) for _, name, statement in _routines()}
    named = re.findall(r"'([\w.]+)'", bodies["timers._guarded_settings"])
    read = re.findall(r"current_setting\('([\w.]+)', true\)", bodies["timers._settings_now"])
    assert len(named) > 30
    assert read == named
