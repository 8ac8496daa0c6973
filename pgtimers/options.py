"""The options of a saved timer, defined once: name, SQL type, default and help of each.

timers.save takes them (in this order, after name, schedule and sql), and so does the
JSON object that timers.save_json(jsonb), timers.save_many and timers.apply read, which is
how the CLI, the HTTP API and the console save. The CLI's flags (cli/save.py), the HTTP
body's keys (http/body.py), the OpenAPI schema (http/timer_schema.py) and the keys of
`pgtimers apply`'s files (cli/spec_file.py) are made from this list; the console's form
and the docs' tables are checked against it (tests/unit/test_options.py), and the list
against timers.save's signature on a real server (tests/integration/test_options_sql.py).

A new option: one Option below, and the SQL (timers.save's signature, timers._timer_args
and what reads it).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Literal

Kind = Literal["bool", "str", "time", "int", "int32", "interval", "names"]

# SQL type (as format_type prints it) -> what a value is on the way in: `time` is ISO 8601
# text, `interval` text PostgreSQL reads ('30 seconds'); `int` is a bigint, `int32` an integer;
# `names` a list of timer names (a JSON array of strings)
KINDS: dict[str, Kind] = {
    "boolean": "bool",
    "text": "str",
    "timestamp with time zone": "time",
    "bigint": "int",
    "integer": "int32",
    "interval": "interval",
    "text[]": "names",
}


@dataclasses.dataclass(frozen=True)
class Option:
    """One option of timers.save."""

    name: str
    sql_type: str
    # timers.save's default; None: NULL, which `default_words` says the meaning of
    default: bool | int | str | None
    help: str
    default_words: str = "none"
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    # the CLI's flag when it is not --name-with-dashes (a boolean that is true by default)
    flag: str = ""
    # the heading its CLI flag is listed under in `pgtimers save --help`
    group: str = ""
    # the console's New timer form has a field for it (pgtimers/http/console/index.html)
    console: bool = False

    @property
    def kind(self) -> Kind:
        """What its value is on the way in (KINDS)."""
        return KINDS[self.sql_type]

    @property
    def cli_flag(self) -> str:
        """Its flag in `pgtimers save`."""
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def shown_default(self) -> str:
        """Its default as the help says it."""
        if self.default is None:
            return self.default_words
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return str(self.default)


POLICIES = "run policies (docs/running.md)"
TOLD = "telling a person (docs/running.md)"

# In timers.save's order.
OPTIONS: tuple[Option, ...] = (
    Option(
        "enabled",
        "boolean",
        True,
        "turned on: it runs on its schedule; off, only when run by hand",
        flag="--disabled",
        console=True,
    ),
    Option(
        "timezone",
        "text",
        None,
        "the zone its wall times are read in, like 'Asia/Kathmandu'",
        default_words="the database's (timers.set_timezone)",
        console=True,
    ),
    Option(
        "catch_up",
        "text",
        None,
        "what to do with due times missed while no runner was up: skip (count them),"
        " latest (one run for all) or all (each, in order)",
        default_words="skip",
        choices=("skip", "latest", "all"),
        console=True,
    ),
    Option("start_at", "timestamp with time zone", None, "not before this time (ISO 8601)"),
    Option("end_at", "timestamp with time zone", None, "not after this time (ISO 8601)"),
    Option("max_runs", "bigint", None, "expire after this many runs", minimum=1),
    Option(
        "timeout",
        "interval",
        None,
        "the time limit of a run, 1 second to 24 hours, like '30 seconds'",
        default_words="10 minutes",
    ),
    Option("locked", "boolean", False, "only a superuser or the installer can unlock it"),
    Option("test_clock", "text", None, "live on this test clock's time (not with autonomous)"),
    Option(
        "retries",
        "integer",
        0,
        "try a failed run again this many times (0 to 100)",
        minimum=0,
        maximum=100,
        group=POLICIES,
        console=True,
    ),
    Option(
        "retry_delay",
        "interval",
        "30 seconds",
        "before the first retry, 1 second to 1 hour; it doubles with each retry, to at"
        " most an hour",
        group=POLICIES,
        console=True,
    ),
    Option(
        "pause_after",
        "integer",
        None,
        "turn it off after this many failed due times in a row (1 to 10000)",
        default_words="never",
        minimum=1,
        maximum=10000,
        group=POLICIES,
        console=True,
    ),
    Option(
        "jitter",
        "interval",
        None,
        "run each due time at a fixed offset in [0, jitter), up to 1 hour and less than"
        " the time between its due times",
        group=POLICIES,
        console=True,
    ),
    Option(
        "priority",
        "integer",
        0,
        "-100 to 100: higher starts first when workers are short",
        minimum=-100,
        maximum=100,
        group=POLICIES,
        console=True,
    ),
    Option(
        "catch_up_window",
        "interval",
        None,
        "a due time missed while no runner was up runs late only if it is less than this"
        " old when a runner is back (more than 0, at most 1 year)",
        console=True,
    ),
    Option(
        "autonomous",
        "boolean",
        False,
        "run the SQL as its owner, statement by statement, outside one transaction"
        " (VACUUM, CREATE INDEX CONCURRENTLY, procedures that COMMIT)",
        console=True,
    ),
    Option(
        "deadline",
        "interval",
        None,
        "a due time with no successful commit this long after it was due raises one"
        " deadline_missed event (more than 0, at most 1 year)",
        group=TOLD,
        console=True,
    ),
    Option(
        "history",
        "text",
        "all",
        "which runs keep a timers.runs row: all, or failures (failures, skips and retries)",
        choices=("all", "failures"),
        group=TOLD,
        console=True,
    ),
    Option(
        "after",
        "text[]",
        None,
        "with schedule 'after': the timers it waits for; it runs once for each of their due"
        " times, after all of them succeeded (docs/running.md)",
        default_words="none",
    ),
    Option(
        "run_group",
        "text",
        None,
        "the run group it belongs to: at most the group's max_running of its timers run at"
        " once (made with max_running 1 if new; timers.set_group changes it)",
        group=POLICIES,
    ),
)
BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}
# what every timer has, before its options
REQUIRED = ("name", "schedule", "sql")
KEYS: tuple[str, ...] = (*REQUIRED, *BY_NAME)


def timer_json(values: Mapping[str, Any]) -> str:
    """The JSON object timers.save_json(jsonb) takes: the given keys, in KEYS' order; a None
    is left out, so the option takes its default."""
    unknown = set(values) - set(KEYS)
    if unknown:
        raise ValueError(f"not options of timers.save: {', '.join(sorted(unknown))}")
    return json.dumps({key: values[key] for key in KEYS if values.get(key) is not None})
