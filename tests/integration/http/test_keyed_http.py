"""GET /api/keyed and GET /api/keyed/{key}: the view's rows in tick order, filters,
URL-encoded keys, 400 and 404, and what each caller's role may see."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from tests.conftest import Database
from tests.integration.http.conftest import Client
from tests.integration.keyed.conftest import arm, call

CLOCK = "tc_7Hq4"
HELD = "job_4Tx9:deadline:at_risk:2027"
LATE = "job_4Tx9:deadline:late:2027"
NOTICE = "clk_8Tx1#US:rung:notice 30d:2027@0"
NOTICE_NEXT = "clk_8Tx1#US:rung:notice 30d:2027@1"
SLASHED = "sbn_7Hq2:schedule:a/b annual:2027"


@pytest.fixture
def scene(conn: psycopg.Connection) -> None:
    """Armed, held and superseded timers of three owners on a test clock (no runner needed)."""
    conn.execute("SELECT timers.create_test_clock(%s, '2028-02-01 14:00Z')", [CLOCK])
    arm(conn, LATE, "2028-04-14 04:00Z", "SELECT 1", test_clock=CLOCK)
    arm(conn, HELD, "2028-03-27 00:30Z", "SELECT 2", test_clock=CLOCK)
    call(conn, "hold", HELD, "ask_9Ts4")
    arm(conn, NOTICE, "2028-03-19 14:00Z", "SELECT 3", place=6, test_clock=CLOCK)
    call(conn, "move", NOTICE, "2028-09-16 14:00Z")
    arm(conn, SLASHED, "2028-02-02 14:00Z", "SELECT 4", place=2)


def view_rows(conn: psycopg.Connection, *args: str | None) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT row_to_json(k) FROM timers.list_keyed(%s, %s, %s) k",
        [*args, *[None] * (3 - len(args))],
    ).fetchall()
    return [r[0] for r in rows]


def keys(resp: Any) -> list[str]:
    assert resp.status == 200, resp.text
    return [row["key"] for row in resp.json()]


def test_list_is_the_view_rows_in_tick_order(
    api: Client, conn: psycopg.Connection, scene: None
) -> None:
    resp = api.get("/api/keyed")
    assert resp.status == 200, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert body == view_rows(conn)
    assert [row["key"] for row in body] == [SLASHED, NOTICE, LATE, NOTICE_NEXT, HELD]
    # every column of the view, in its order: a column it gains shows by itself
    cur = conn.execute("SELECT * FROM timers.keyed LIMIT 0")
    assert cur.description is not None
    assert list(body[0]) == [c.name for c in cur.description]
    held = body[-1]
    assert (held["status"], held["owed_at"], held["held_by"]) == ("held", None, "ask_9Ts4")
    assert held["sql"] == "SELECT 2"  # the token acts as the runner's role (here a superuser)


def test_filters(api: Client, conn: psycopg.Connection, scene: None) -> None:
    assert keys(api.get("/api/keyed?on=job_4Tx9")) == [LATE, HELD]
    assert keys(api.get("/api/keyed?on=" + quote("clk_8Tx1#US", safe=""))) == [
        NOTICE,
        NOTICE_NEXT,
    ]
    assert keys(api.get("/api/keyed?status=held")) == [HELD]
    assert keys(api.get("/api/keyed?status=superseded&on=" + quote("clk_8Tx1#US"))) == [NOTICE]
    assert keys(api.get(f"/api/keyed?test_clock={CLOCK}&status=armed")) == [LATE, NOTICE_NEXT]
    assert api.get(f"/api/keyed?test_clock={CLOCK}").json() == view_rows(conn, None, None, CLOCK)
    # empty is no filter, as absent
    assert keys(api.get("/api/keyed?on=&status=&test_clock=")) == keys(api.get("/api/keyed"))
    nobody = api.get("/api/keyed?on=job_none")
    assert (nobody.status, nobody.json()) == (200, [])


@pytest.mark.parametrize("status", ["pending", "ARMED", "armed "])
def test_bad_status_is_a_400_naming_the_states(api: Client, status: str) -> None:
    resp = api.get("/api/keyed?status=" + quote(status))
    assert resp.status == 400
    assert resp.error == (f"bad status '{status}': use one of armed, fired, superseded, held, void")


@pytest.mark.parametrize(
    ("key", "safe"),
    [
        (HELD, ""),
        (NOTICE, ""),  # '#' and ' ' must be encoded; ':' and '@' too, here
        (NOTICE, ":@"),  # ':' and '@' may also stand as they are in a path
        (SLASHED, ""),  # '/' as %2F
        (SLASHED, "/"),  # and as a plain '/'
    ],
)
def test_one_timer_by_its_url_encoded_key(
    api: Client, conn: psycopg.Connection, scene: None, key: str, safe: str
) -> None:
    resp = api.get("/api/keyed/" + quote(key, safe=safe))
    assert resp.status == 200, resp.text
    expected = [row for row in view_rows(conn) if row["key"] == key]
    assert [resp.json()] == expected
    row = conn.execute(
        "SELECT row_to_json(k)::text FROM timers.keyed k WHERE key = %s", [key]
    ).fetchone()
    assert row is not None and resp.text == row[0]


def test_a_missing_key_is_a_404(api: Client, db: Database, scene: None) -> None:
    resp = api.get("/api/keyed/" + quote("job_4Tx9:deadline:at_risk:2026", safe=""))
    assert resp.status == 404
    assert resp.error == (
        f"there is no keyed timer 'job_4Tx9:deadline:at_risk:2026' in database {db.name}"
    )
    # a key differing by case only is another key (keys compare byte by byte)
    assert api.get("/api/keyed/" + quote(HELD.upper(), safe="")).status == 404
    assert api.get("/api/keyed/").status == 404


def test_a_nul_in_a_filter_or_key_is_a_400(api: Client) -> None:
    assert api.get("/api/keyed?on=a%00b").status == 400
    assert api.get("/api/keyed/a%00b").status == 400


def test_needs_credentials(api: Client, scene: None) -> None:
    resp = api.anonymous().get("/api/keyed")
    assert resp.status == 401
    assert api.anonymous().get("/api/keyed/" + quote(HELD, safe="")).status == 401
    # credentials come first: a bad status without them is still a 401
    assert api.anonymous().get("/api/keyed?status=bogus").status == 401


def test_a_reader_sees_no_sql_of_timers_it_does_not_own(
    api: Client, db: Database, basic: bool, scene: None
) -> None:
    with db.connect("pgt_http_admin") as admin:
        arm(admin, "job_own:task:file:2027", "2028-05-01 00:00Z", "SELECT 5")
    reader = api.as_basic("pgt_http_reader")
    listed = reader.get("/api/keyed")
    assert listed.status == 200, listed.text
    sql = {row["key"]: row["sql"] for row in listed.json()}
    assert len(sql) == 6 and set(sql.values()) == {None}
    one = reader.get("/api/keyed/" + quote(HELD, safe=""))
    assert one.status == 200 and one.json()["sql"] is None and one.json()["held_by"] == "ask_9Ts4"
    # the same rows as an admin, and as the token (the runner's role): with their SQL
    admin = api.as_basic("pgt_http_admin").get("/api/keyed?on=job_own").json()
    assert [row["sql"] for row in admin] == ["SELECT 5"]
    assert api.get("/api/keyed/" + quote(HELD, safe="")).json()["sql"] == "SELECT 2"
    # a role that is not a reader may not read them at all
    nobody = api.as_basic("pgt_http_nobody")
    assert nobody.get("/api/keyed").status == 403
    assert nobody.get("/api/keyed/" + quote(HELD, safe="")).status == 403


def test_read_only(api: Client, scene: None) -> None:
    resp = api.post("/api/keyed", {"key": HELD})
    assert resp.status == 405 and resp.headers["allow"] == "GET,HEAD"
    assert api.post("/api/keyed/" + quote(HELD, safe="")).status == 405


def test_in_the_openapi_document(api: Client) -> None:
    paths = api.get("/api/openapi.json").json()["paths"]
    assert set(paths["/api/keyed"]) == {"get"} and set(paths["/api/keyed/{key}"]) == {"get"}
    names = [p["name"] for p in paths["/api/keyed"]["get"]["parameters"]]
    assert names == ["db", "on", "status", "test_clock"]
