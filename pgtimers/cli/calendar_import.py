"""`pgtimers calendar import`: build a trading calendar from the `exchange_calendars`
package's session list."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from dataclasses import dataclass, field

import psycopg

from pgtimers.cli.commands import Subparsers, add_command, date
from pgtimers.cli.dsn import resolve_dsn
from pgtimers.cli.exit_codes import ExitCode

# exchange_calendars' weekmask runs Monday..Sunday; ours is named days.
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


_ADD_HOLIDAY = "SELECT timers.add_holiday(%s, %s, %s)"
_ADD_TRADING_DAY = "SELECT timers.add_trading_day(%s, %s, %s)"


class CalendarImportError(ValueError):
    """The exchange, the range or the package is not usable; the message says why."""


@dataclass
class CalendarPlan:
    """What a calendar must hold to match an exchange's sessions over a range, day for day."""

    exchange: str
    week: str
    valid_from: dt.date
    valid_until: dt.date
    holidays: list[dt.date] = field(default_factory=list)
    trading_days: list[dt.date] = field(default_factory=list)


def _week_text(weekmask: str) -> str:
    days = [name for name, bit in zip(_DAYS, weekmask, strict=True) if bit == "1"]
    return ",".join(days) or "none"


def plan_from_exchange(code: str, start: dt.date, end: dt.date) -> CalendarPlan:
    """The week, holidays and extra trading days that reproduce the exchange's sessions."""
    try:
        import exchange_calendars as xc
    except ImportError as exc:
        raise CalendarImportError(
            "importing needs the exchange_calendars package: pip install 'pgtimers[calendars]'"
        ) from exc
    if end < start:
        raise CalendarImportError(f"--to {end} is before --from {start}")
    if code not in xc.get_calendar_names(include_aliases=True):
        raise CalendarImportError(
            f"unknown exchange '{code}'; use an ISO MIC like XNYS, XLON or XTKS (the list:"
            " python -c 'import exchange_calendars as x; print(x.get_calendar_names())')"
        )
    try:
        cal = xc.get_calendar(code, start=start.isoformat(), end=end.isoformat())
    except Exception as exc:  # the package raises several kinds for bad ranges
        raise CalendarImportError(
            f"exchange_calendars cannot build {code} for {start}..{end}: {exc}"
        ) from exc
    sessions = {ts.date() for ts in cal.sessions}
    weekmask = str(cal.weekmask)
    plan = CalendarPlan(code, _week_text(weekmask), start, end)
    day = start
    while day <= end:
        in_week = weekmask[day.weekday()] == "1"
        if in_week and day not in sessions:
            plan.holidays.append(day)
        elif not in_week and day in sessions:
            plan.trading_days.append(day)
        day += dt.timedelta(days=1)
    return plan


def apply_plan(conn: psycopg.Connection, name: str, plan: CalendarPlan) -> dict[str, int]:
    """Make calendar `name` match the plan, in one transaction, through the SQL functions."""
    with conn.transaction():
        conn.execute(
            "SELECT timers.save_calendar(%s, %s, %s, %s)",
            [name, plan.week, plan.valid_from, plan.valid_until],
        )
        wanted = dict.fromkeys(plan.holidays, False) | dict.fromkeys(plan.trading_days, True)
        existing: dict[dt.date, bool] = dict(
            conn.execute(
                "SELECT d.day, d.trading FROM timers.calendar_days d"
                " JOIN timers.calendars c ON c.name = d.calendar"
                " WHERE lower(c.name) = lower(%s) AND d.day BETWEEN %s AND %s",
                [name, plan.valid_from, plan.valid_until],
            ).fetchall()
        )
        removed = [d for d in existing if d not in wanted]
        for day in removed:
            conn.execute("SELECT timers.remove_day(%s, %s)", [name, day])
        changed = {d: t for d, t in wanted.items() if existing.get(d) is not t}
        note = f"{plan.exchange} (exchange_calendars)"
        for day, trading in sorted(changed.items()):
            query = _ADD_TRADING_DAY if trading else _ADD_HOLIDAY
            conn.execute(query, [name, day, note])
    return {
        "holidays": len(plan.holidays),
        "trading_days": len(plan.trading_days),
        "changed": len(changed),
        "removed": len(removed),
    }


def cmd_calendar_import(args: argparse.Namespace) -> int:
    """Build a trading calendar from an exchange's sessions."""
    today = dt.date.today()
    start = args.from_day or dt.date(today.year, 1, 1)
    end = args.to_day or dt.date(today.year + 1, 12, 31)
    name = args.name or args.exchange.lower()
    try:
        plan = plan_from_exchange(args.exchange, start, end)
    except CalendarImportError as exc:
        print(f"pgtimers: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    with psycopg.connect(resolve_dsn(args.dsn)) as conn:
        counts = apply_plan(conn, name, plan)
    print(
        f"calendar {name}: {args.exchange} from {start} to {end}, week {plan.week},"
        f" {counts['holidays']} holidays, {counts['trading_days']} extra trading days"
        f" ({counts['changed']} changed, {counts['removed']} removed)"
    )
    return ExitCode.OK


def add_parser(sub: Subparsers) -> None:
    """Add `calendar import`."""
    cal = sub.add_parser(
        "calendar",
        help="trading calendars: import from exchange_calendars",
        epilog="example:\n  pgtimers calendar import XNYS --from 2026-01-01 --to 2027-12-31",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cal_sub = cal.add_subparsers(dest="calendar_command", required=True, metavar="ACTION")
    p = add_command(
        cal_sub,
        "import",
        "build a calendar from the exchange_calendars package",
        "pgtimers calendar import XNYS --from 2026-01-01 --to 2027-12-31 --name nyse",
    )
    p.add_argument("exchange", help="ISO MIC code of the exchange, like XNYS")
    p.add_argument("--from", dest="from_day", type=date, help="first day (default: Jan 1)")
    p.add_argument("--to", dest="to_day", type=date, help="last day (default: end of next year)")
    p.add_argument("--name", help="calendar name (default: the code in lower case)")
    p.set_defaults(func=cmd_calendar_import)
