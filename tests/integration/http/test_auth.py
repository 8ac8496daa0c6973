"""Who may call: the token, HTTP Basic as a database role (PostgreSQL privileges
decide), anonymous only on loopback when allowed; ?db= and the browser guards."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from pgtimers.http.settings import HttpConfigError
from tests.conftest import Database
from tests.integration.http.conftest import Client, Served

TIMER = {"name": "t1", "schedule": "hourly", "sql": "SELECT 1"}


@pytest.fixture
def client(db: Database, serve: Callable[..., Served]) -> Client:
    """No credentials yet, of a server with a token, serving the test's database."""
    return Client(serve([db.dsn]).port)


def test_no_credentials_is_401_with_a_basic_challenge(client: Client) -> None:
    resp = client.get("/api/timers")
    assert resp.status == 401
    assert resp.headers["www-authenticate"].startswith('Basic realm="pgtimers"')
    assert resp.error.startswith("authentication required")


def test_the_console_gets_no_browser_prompt(client: Client) -> None:
    resp = client.get("/api/timers", headers={"X-Pgtimers-Console": "1"})
    assert resp.status == 401
    assert "www-authenticate" not in resp.headers


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("Bearer not-the-token", "bad token"),
        ("Bearer", "bad token"),
        ("Digest abc", "use Authorization: Bearer <token> or Basic <role:password>"),
        ("Basic !!!", "bad Basic credentials"),
        ("Basic bm9jb2xvbg==", "bad Basic credentials"),  # "nocolon"
    ],
)
def test_bad_credentials_are_401(client: Client, header: str, message: str) -> None:
    resp = client.get("/api/timers", headers={"Authorization": header})
    assert resp.status == 401
    assert resp.error.startswith(message)


def test_token_has_the_servers_role(client: Client) -> None:
    api = client.as_token()
    assert api.get("/api/timers").status == 200
    saved = api.post("/api/timers", TIMER)
    assert saved.status == 200
    assert saved.json()["created_by"] == "postgres" or saved.json()["created_by"]


def test_no_token_configured_refuses_bearer(db: Database, serve: Callable[..., Served]) -> None:
    client = Client(serve([db.dsn], token=None).port)
    assert client.as_token().get("/api/timers").status == 401


def test_basic_admin_saves_as_itself_and_is_audited(
    basic: bool, client: Client, conn: psycopg.Connection
) -> None:
    admin = client.as_basic("pgt_http_admin")
    resp = admin.post("/api/timers", TIMER)
    assert resp.status == 200, resp.text
    assert resp.json()["created_by"] == "pgt_http_admin"
    assert admin.post("/api/timers/t1/enable", {"enabled": False}).status == 200
    assert admin.post("/api/timers/t1/delete").json() == {"deleted": True}
    audit = conn.execute("SELECT actor, session, action FROM timers.audit ORDER BY id").fetchall()
    assert audit == [
        ("pgt_http_admin", "pgt_http_admin", "save"),
        ("pgt_http_admin", "pgt_http_admin", "disable"),
        ("pgt_http_admin", "pgt_http_admin", "delete"),
    ]


def test_basic_reader_reads_but_may_not_change(
    basic: bool, client: Client, conn: psycopg.Connection
) -> None:
    conn.execute("SELECT timers.save('t1', 'hourly', 'SELECT 1')")
    reader = client.as_basic("pgt_http_reader")
    listed = reader.get("/api/timers")
    assert listed.status == 200
    assert [t["name"] for t in listed.json()["timers"]] == ["t1"]
    assert reader.get("/api/stats").status == 200
    for path, body in [
        ("/api/timers", TIMER),
        ("/api/timers/t1/run", None),
        ("/api/timers/t1/enable", {"enabled": False}),
        ("/api/timers/t1/delete", None),
    ]:
        resp = reader.post(path, body)
        assert resp.status == 403, (path, resp.text)
        assert "permission denied" in resp.error
    assert conn.execute("SELECT enabled FROM timers.timers").fetchall() == [(True,)]


def test_basic_role_without_pgtimers_roles_is_403(basic: bool, client: Client) -> None:
    resp = client.as_basic("pgt_http_nobody").get("/api/timers")
    assert resp.status == 403
    assert "permission denied" in resp.error


@pytest.mark.parametrize(("role", "password"), [("pgt_http_admin", "wrong"), ("pgt_ghost", "x")])
def test_basic_wrong_password_or_role_is_401(
    basic: bool, client: Client, role: str, password: str
) -> None:
    resp = client.as_basic(role, password).get("/api/timers")
    assert resp.status == 401
    assert resp.error == f"the database refused role '{role}' with this password"
    assert "www-authenticate" in resp.headers
    # the refusal is remembered briefly; still a 401
    assert client.as_basic(role, password).get("/api/timers").status == 401


def test_basic_is_refused_where_the_server_trusts_the_role(client: Client) -> None:
    # pgt_alice has no password; the embedded test server trusts it (pg_hba trust)
    resp = client.as_basic("pgt_alice", "anything").get("/api/timers")
    assert resp.status == 401
    assert (
        "does not check passwords for role 'pgt_alice'" in resp.error
        or "refused role 'pgt_alice'" in resp.error
    )


def test_anonymous_on_loopback_when_allowed(db: Database, serve: Callable[..., Served]) -> None:
    client = Client(serve([db.dsn], token=None, allow_anonymous_loopback=True).port)
    assert client.get("/api/timers").status == 200
    assert client.post("/api/timers", TIMER).status == 200
    # DNS rebinding: a page of another site that resolves to 127.0.0.1
    rebound = client.get("/api/timers", headers={"Host": f"evil.example:{client.port}"})
    assert rebound.status == 401
    assert "loopback host name" in rebound.error
    assert client.get("/api/timers", headers={"Host": f"localhost:{client.port}"}).status == 200


def test_anonymous_is_refused_off_loopback(db: Database, serve: Callable[..., Served]) -> None:
    with pytest.raises(HttpConfigError, match="only on a loopback address"):
        serve([db.dsn], addr="0.0.0.0:0", allow_anonymous_loopback=True)


def test_token_still_works_with_anonymous(db: Database, serve: Callable[..., Served]) -> None:
    client = Client(serve([db.dsn], allow_anonymous_loopback=True).port)
    assert client.as_token().get("/api/timers").status == 200
    assert client.as_token("wrong-token-xxxxxxxx").get("/api/timers").status == 401


def test_cross_site_post_is_refused(api: Client) -> None:
    evil = api.post("/api/timers", TIMER, headers={"Origin": "http://evil.example"})
    assert evil.status == 403
    assert evil.error == "cross-site request refused: Origin http://evil.example is not this server"
    same = api.post("/api/timers", TIMER, headers={"Origin": f"http://127.0.0.1:{api.port}"})
    assert same.status == 200


def test_short_token_is_a_config_error(db: Database, serve: Callable[..., Served]) -> None:
    with pytest.raises(HttpConfigError, match="at least 16 characters"):
        serve([db.dsn], token="short")


def test_db_parameter_picks_a_served_database(
    db: Database, db2: Database, serve: Callable[..., Served]
) -> None:
    api = Client(serve([db.dsn, db2.dsn]).port).as_token()
    assert api.post(f"/api/timers?db={db2.name}", TIMER).json()["database"] == db2.name
    assert api.get("/api/timers").json()["timers"] == []  # the default is the first
    assert [t["database"] for t in api.get(f"/api/timers?db={db2.name}").json()["timers"]] == [
        db2.name
    ]
    assert api.post(f"/api/timers/t1/enable?db={db.name}").status == 404
    assert api.post(f"/api/timers/t1/enable?db={db2.name}").status == 200
    for method, path in [("GET", "/api/timers"), ("POST", "/api/timers/t1/delete")]:
        resp = api.request(method, path + "?db=nowhere")
        assert resp.status == 404
        assert resp.error == "there is no database 'nowhere' served here"


def test_databases_as_a_live_function(
    db: Database, db2: Database, serve: Callable[..., Served]
) -> None:
    served = [db.dsn]
    api = Client(serve(lambda: list(served)).port).as_token()
    assert api.get(f"/api/timers?db={db2.name}").status == 404
    served.append(db2.dsn)
    assert api.get(f"/api/timers?db={db2.name}").status == 200
    served.clear()
    assert api.get("/api/timers").status == 503
