"""The files of `pgtimers apply` read without a database: the spec they make and every
bad input named by file and line."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgtimers.cli import toml_out
from pgtimers.cli.spec_file import SpecError, read_files


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _errors(*paths: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        read_files(list(paths))
    return caught.value.errors


GOOD = """\
managed_by = "shop"

[[timer]]
name = "totals"
schedule = "every 5m"
sql = '''
SELECT 1;
[[timer]]
'''
retries = 3
start_at = 2026-01-01T00:00:00Z
locked = true

[[timer]]
name = "nightly"
schedule = "daily 02:00"
sql_file = "sql/nightly.sql"

[[calendar]]
name = "nepse"
week = "sun-thu"
valid_from = 2020-01-01

[[calendar.holidays]]
day = 2026-12-25
note = "Christmas"
"""


def test_a_good_file_is_the_spec_with_sql_file_read_beside_it(tmp_path: Path) -> None:
    (tmp_path / "sql").mkdir()
    _write(tmp_path / "sql", "nightly.sql", "CALL nightly();\n")
    spec = read_files([_write(tmp_path, "t.toml", GOOD)])
    assert spec.as_json() == {
        "timer": [
            {
                "name": "totals",
                "schedule": "every 5m",
                "sql": "SELECT 1;\n[[timer]]\n",
                "retries": 3,
                "start_at": "2026-01-01T00:00:00+00:00",
                "locked": True,
            },
            {"name": "nightly", "schedule": "daily 02:00", "sql": "CALL nightly();\n"},
        ],
        "calendar": [
            {
                "name": "nepse",
                "week": "sun-thu",
                "valid_from": "2020-01-01",
                "holidays": [{"day": "2026-12-25", "note": "Christmas"}],
            }
        ],
        "managed_by": "shop",
    }
    # a header inside the SQL's string is not a table: the second timer is on line 14
    assert spec.where == {"totals": f"{tmp_path}/t.toml:3", "nightly": f"{tmp_path}/t.toml:14"}
    assert spec.as_json("ci")["managed_by"] == "ci"


def test_every_bad_input_is_named_by_file_line_and_timer(tmp_path: Path) -> None:
    first = _write(
        tmp_path,
        "a.toml",
        """\
[[timer]]
name = "totals"
schedule = "every 5m"
sql = "SELECT 1"
retries = "3"

[[timer]]
name = "nightly"
schedule = "daily 02:00"
sql_file = "missing.sql"
retires = 3

[[timer]]
schedule = "hourly"
sql = "x"
sql_file = "y"

[[calendar]]
name = "nepse"

[[calendar.holidays]]
dya = 2026-12-26

[[timers]]
name = "x"
""",
    )
    second = _write(tmp_path, "b.toml", '[[timer]]\nname = "TOTALS"\nschedule = "hourly"\n')
    errors = _errors(first, second)
    assert errors == [
        f"{first}:24: unknown key 'timers' (did you mean 'timer'?)",
        f"{first}:5: timer \"totals\": retries must be an integer, not a string ('3')",
        f"{first}:11: timer \"nightly\": unknown key 'retires' (did you mean 'retries'?)",
        f"{first}:10: timer \"nightly\": cannot read sql_file 'missing.sql'"
        f" ({tmp_path}/missing.sql: No such file or directory)",
        f'{first}:13: [[timer]]: no name (name = "…")',
        f"{first}:13: [[timer]]: has both sql and sql_file: keep one",
        f"{first}:22: calendar \"nepse\": holidays: unknown key 'dya' (did you mean 'day'?)",
        f'{second}:1: timer "TOTALS": no SQL: add sql = "…" or sql_file = "file.sql"',
        f'{second}:1: timer "TOTALS": is named twice (also at {first}:1)',
    ]


def test_not_toml_names_the_line(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.toml", '[[timer]]\nname = "x"\nschedule = every 5m\n')
    (error,) = _errors(bad)
    assert error.startswith(f"{bad}:3: not TOML: ")


def test_a_missing_schedule_and_a_wrong_type_of_table(tmp_path: Path) -> None:
    bad = _write(tmp_path, "t.toml", 'timer = [1]\n\n[[calendar]]\nname = "c"\nweeks = 3\n')
    assert _errors(bad) == [
        f"{bad}:1: [[timer]]: must be a table, not an integer",
        f'{bad}:5: calendar "c": weeks must be an array of tables, not an integer',
    ]
    nosched = _write(tmp_path, "n.toml", '[[timer]]\nname = "x"\nsql = "SELECT 1"\n')
    assert _errors(nosched) == [f'{nosched}:1: timer "x": no schedule (schedule = "…")']


def test_an_unreadable_file(tmp_path: Path) -> None:
    assert _errors(tmp_path / "nope.toml") == [
        f"{tmp_path}/nope.toml: cannot read it (No such file or directory)"
    ]


def test_headers_inside_strings_and_comments_are_not_tables(tmp_path: Path) -> None:
    text = (
        '[[timer]]\nname = "a"\nschedule = "hourly"\n'
        "sql = \"SELECT 'it''''s'\"  # ''' in a comment\n\n"
        '[[timer]]\nname = "b"\nschedule = "hourly"\n'
        'sql = """\n[[timer]]\n\\"""\n"""\n\n'
        "[[timer]]\nname = \"c\"\nschedule = \"hourly\"\nsql = '''\n[[timer]]\n'''\n"
        "retries = 1\n"
    )
    spec = read_files([_write(tmp_path, "t.toml", text)])
    assert [w.rsplit(":", 1)[1] for w in spec.where.values()] == ["1", "6", "14"]
    bad = _write(tmp_path, "bad.toml", text.replace("retries = 1", "retries = true"))
    assert _errors(bad) == [f'{bad}:20: timer "c": retries must be an integer, not a boolean']


@settings(max_examples=50)
@given(st.lists(st.text(st.characters(exclude_categories=["Cs"])), min_size=1, max_size=5))
def test_the_line_of_each_timer_of_an_export_is_its_header(sqls: list[str]) -> None:
    timers = [{"name": f"t{i}", "schedule": "hourly", "sql": s} for i, s in enumerate(sqls)]
    text = toml_out.document({}, [("timer", timers)], ["name", "schedule"])
    with tempfile.TemporaryDirectory() as folder:
        spec = read_files([_write(Path(folder), "t.toml", text)])
    lines = text.split("\n")  # TOML lines end at \n only
    assert [lines[int(w.rsplit(":", 1)[1]) - 1] for w in spec.where.values()] == [
        "[[timer]]"
    ] * len(sqls)
    assert [t["sql"] for t in spec.timers] == sqls
