"""Static checks of the repeatable SQL code (sql/code/): rights and search_path of every
routine, stated next to it (no database needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.sqltext import head, statements, without_strings

ROOT = Path(__file__).resolve().parents[2]
CODE = ROOT / "sql" / "code"
# Where pgtimers is called from outside its routines, under the caller's search_path.
APPLICATION = (
    "pgtimers/**/*.py",
    "pgtimers/**/*.sql",
    "contrib/**/*.*",
    "docs/**/*.md",
    "README.md",
    "migrations/**/*.py",
    "sql/migrations/*.sql",
    # what the security battery calls with a schema of someone else's before pg_catalog
    "tests/security/test_search_path.py",
)
# Runs right after a timer's SQL, which may have set its own search_path.
AFTER_SQL = {"timers._restore_session"}
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


def _entry_points() -> dict[str, str]:
    """Routines called other than from a routine that pins search_path: by the
    application, the docs and migrations (a caller's own path), by a view or another
    statement of the code, by a procedure that commits, by runners of an older release
    (24_runner_api.sql); each with where."""
    found: dict[str, str] = {}
    for file, name, statement in _routines():
        if name in COMMITTING:
            for call in re.findall(r"(timers\.\w+)\(", _body(statement)):
                found.setdefault(call, f"{name} (commits)")
        if name == "timers._runner_api_routines":
            for call in re.findall(r"(timers\.\w+)\(", _body(statement)):
                found.setdefault(call, f"a runner (the API of {file})")
    for path in sorted(CODE.glob("*.sql")):
        for statement in statements(path.read_text()):
            if not ROUTINE.match(statement) and head(statement, 1) not in (
                "GRANT",
                "REVOKE",
                "COMMENT",
            ):
                for call in re.findall(r"(timers\.\w+)\(", statement):
                    found.setdefault(call, f"a statement of {path.name}")
    for pattern in APPLICATION:
        for path in sorted(ROOT.glob(pattern)):
            for call in re.findall(r"(timers\.\w+)\(", path.read_text()):
                found.setdefault(call, str(path.relative_to(ROOT)))
    return found


def test_every_routine_pins_its_search_path_or_needs_none() -> None:
    """search_path = pg_catalog, pg_temp is set where a call enters pgtimers; a routine
    that only pgtimers' routines call runs under that path (a SET clause costs each call
    about 5 us: the fire path makes some 30 calls)."""
    entries = _entry_points()
    assert {"timers._run_due", "timers._fire", "timers.save"} <= entries.keys()
    for file, name, statement in _routines():
        header = statement.split(" AS ", 1)[0]
        if "SET search_path = pg_catalog, pg_temp" in header or name in COMMITTING:
            continue
        entry = _entry(name, header, entries)
        if not entry:
            continue  # called only by pgtimers' routines, under their path
        # an inlinable SQL helper: no name it uses can be looked up in a user's schema
        assert "LANGUAGE sql" in header, f"{file}: {name} has no SET search_path: {entry}"
        body = without_strings(_body(statement))
        body = re.sub(r"OPERATOR\(pg_catalog\.[^)]+\)", " ", body)
        for call in re.findall(r"(?<![\w.:])(\w+)\(", body):
            assert call.upper() in CONSTRUCTS, f"{name} calls {call}() unqualified"
        leftover = re.sub(r"::\w+(\[\])?|\[|\]|[(),.;]", " ", body)
        assert not re.search(r"[-+*/<>=~!@#%^&|]", leftover), f"{name} uses a bare operator"


def _entry(name: str, header: str, entries: dict[str, str]) -> str:
    """Why a routine is an entry point (a call may come with another search_path), or ''."""
    if not name.startswith("timers._"):
        return "it is part of the API"
    if "SECURITY DEFINER" in header:
        return "it is SECURITY DEFINER"
    if re.search(r"RETURNS (event_)?trigger", header):
        return "it is a trigger"
    if name in AFTER_SQL:
        return "it runs right after a timer's SQL"
    return f"{entries[name]} calls it" if name in entries else ""


def test_the_settings_a_run_may_not_change_are_read_in_the_order_they_are_named() -> None:
    """timers._settings_now() writes out timers._guarded_settings()'s names (an inlined
    expression, not a query): the same names, in the same order."""
    bodies = {name: _body(statement) for _, name, statement in _routines()}
    named = re.findall(r"'([\w.]+)'", bodies["timers._guarded_settings"])
    read = re.findall(r"current_setting\('([\w.]+)', true\)", bodies["timers._settings_now"])
    assert len(named) > 30
    assert read == named
