"""Every option of pgtimers/options.py is everywhere a timer's options are: a flag of
`pgtimers save` (and in the JSON it sends), a key of the HTTP body and of the OpenAPI
schema, a key of `pgtimers apply`'s files, a row of the docs' option tables, and a field
of the console's New timer form when the option says it has one. No database needed
(tests/integration/test_options_sql.py checks the list against the SQL)."""

from __future__ import annotations

import argparse
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pgtimers.cli.main import build_parser
from pgtimers.cli.save import timer_of
from pgtimers.cli.spec_file import TIMER_KEYS
from pgtimers.http.body import SAVE_KEYS
from pgtimers.http.openapi import document
from pgtimers.options import BY_NAME, KEYS, OPTIONS, REQUIRED, Option

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "pgtimers" / "http" / "console" / "index.html"
# (doc, the header row of its table of a timer's keys)
DOC_TABLES = [
    ("docs/http.md", "| key | JSON | default |"),
    ("docs/timers-as-code.md", "| key | TOML type | default |"),
]
# a value of each kind for a command line that sets every option
_ARGUMENT = {
    "str": "x",
    "time": "2030-01-01Z",
    "int": "5",
    "int32": "7",
    "interval": "1 minute",
    "names": "a,b",
}


def _save_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices["save"]
            return found
    raise AssertionError("no `pgtimers save`")


def _argument(option: Option) -> list[str]:
    if option.kind == "bool":
        return [option.cli_flag]
    return [option.cli_flag, option.choices[-1] if option.choices else _ARGUMENT[option.kind]]


def test_the_list_is_well_formed() -> None:
    assert len(BY_NAME) == len(OPTIONS)
    assert not set(REQUIRED) & set(BY_NAME)
    for option in OPTIONS:
        assert re.fullmatch(r"[a-z][a-z_]*", option.name), option.name
        assert option.help and option.kind  # kind: a KeyError for an SQL type not in KINDS
        if option.kind == "bool":
            assert isinstance(option.default, bool), option.name
        if option.choices and option.default is not None:
            assert option.default in option.choices, option.name


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_pgtimers_save_has_a_flag_for_it(option: Option) -> None:
    flags = {flag: action for action in _save_parser()._actions for flag in action.option_strings}
    assert option.cli_flag in flags, f"`pgtimers save` has no {option.cli_flag} ({option.name})"
    assert flags[option.cli_flag].dest == option.name
    assert option.shown_default in (flags[option.cli_flag].help or "")


def test_pgtimers_save_sends_every_option() -> None:
    line = ["save", "t", "hourly", "SELECT 1"]
    for option in OPTIONS:
        line += _argument(option)
    sent = json.loads(timer_of(build_parser().parse_args(line)))
    assert list(sent) == list(KEYS)
    assert sent["enabled"] is False and sent["locked"] is True and sent["max_runs"] == 5


def test_pgtimers_save_without_flags_sends_no_option() -> None:
    sent = json.loads(timer_of(build_parser().parse_args(["save", "t", "hourly", "SELECT 1"])))
    # booleans are sent as their defaults; the others are left out: timers.save's defaults
    assert sent == {
        "name": "t",
        "schedule": "hourly",
        "sql": "SELECT 1",
        **{o.name: o.default for o in OPTIONS if o.kind == "bool"},
    }


def test_the_http_body_takes_every_option() -> None:
    assert list(SAVE_KEYS) == list(KEYS)
    for option in OPTIONS:
        assert SAVE_KEYS[option.name] == (option.kind, False)


def test_the_openapi_schema_has_every_option() -> None:
    body = document()["components"]["schemas"]["SaveTimer"]
    assert list(body["properties"]) == list(KEYS)
    assert body["required"] == list(REQUIRED)
    for option in OPTIONS:
        schema = body["properties"][option.name]
        assert schema.get("default") == option.default, option.name
        assert schema.get("enum", []) == list(option.choices), option.name


def test_spec_files_take_every_option() -> None:
    assert [key for key in TIMER_KEYS if key != "sql_file"] == list(KEYS)


class _Form(HTMLParser):
    """The named fields of the console's New timer form: name -> its tag's attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.fields: dict[str, dict[str, Any]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.inside = found.get("id") == "new-timer-form"
        elif self.inside and tag in ("input", "select", "textarea") and found.get("name"):
            self.fields[str(found["name"])] = {"tag": tag, **found}

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def test_the_console_form_has_the_options_it_shows() -> None:
    form = _Form()
    form.feed(CONSOLE.read_text(encoding="utf-8"))
    shown = {o.name for o in OPTIONS if o.console}
    assert set(form.fields) - set(KEYS) == set(), "fields that are no option"
    assert shown - set(form.fields) == set(), "options marked console=True without a field"
    assert set(form.fields) - set(REQUIRED) == shown, "fields of options not marked console=True"
    for name in shown:
        field, option = form.fields[name], BY_NAME[name]
        # console.js reads a box as true/false and a number field as a number
        assert (field.get("type") == "checkbox") == (option.kind == "bool"), name
        assert (field.get("type") == "number") == (option.kind in ("int", "int32")), name
        if option.choices:
            assert field["tag"] == "select", name


def _table_keys(path: str, header: str) -> set[str]:
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    start = lines.index(header) + 2  # after the header and its |---| row
    keys: set[str] = set()
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        keys |= set(re.findall(r"`([a-z_]+)`", line.split("|")[1]))
    return keys


@pytest.mark.parametrize(("path", "header"), DOC_TABLES)
def test_the_docs_tables_have_every_option(path: str, header: str) -> None:
    keys = _table_keys(path, header)
    assert set(BY_NAME) - keys == set(), f"options missing from the table of {path}"
    assert keys - {*KEYS, "sql_file"} == set(), f"keys in the table of {path} that are no option"
