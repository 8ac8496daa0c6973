"""`pgtimers run --http ADDR` with no token set: it makes one for this run and prints the
console's link with it once; the API takes it as a bearer token, the runner's role."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pgtimers.http.server import console_link
from pgtimers.http.settings import TOKEN_ENV, HttpSettings
from tests.conftest import Database, scalar
from tests.integration.http.conftest import TOKEN, Client
from tests.support.runner import RunnerProcess

LINK = re.compile(r"^pgtimers: console: (http://\S+)$", re.MULTILINE)


Start = Callable[..., RunnerProcess]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    return {**env, **extra}


@pytest.fixture
def start(db: Database, tmp_path: Path) -> Iterator[Start]:
    started: list[RunnerProcess] = []

    def run(extra: list[str] | None = None, env: Mapping[str, str] | None = None) -> RunnerProcess:
        # `env` is the whole environment: its token variable, if any, and no other
        runner = RunnerProcess(
            ["--dsn", db.dsn, "--http", "127.0.0.1:0", *(extra or [])],
            tmp_path / f"runner{len(started)}.log",
            env=dict(env or _env()),
            unset=[TOKEN_ENV],
        )
        started.append(runner)
        runner.wait_for("event=serving")
        runner.wait_for("event=http_serving")
        return runner

    yield run
    for runner in started:
        runner.terminate()


def test_the_printed_link_opens_the_console_and_the_api(start: Start, db: Database) -> None:
    runner = start()
    runner.wait_for("pgtimers: console: ")
    log = runner.log()
    links = LINK.findall(log)
    assert len(links) == 1, log
    url = urlsplit(links[0])
    assert (url.hostname, url.port, url.path) == ("127.0.0.1", runner.http_port(), "/")
    assert url.query.startswith("token=")
    token = url.query.removeprefix("token=")
    assert len(token) >= 40 and re.fullmatch(r"[A-Za-z0-9_-]+", token), token
    # written once, in the link: not in the logfmt line, nowhere else
    assert log.count(token) == 1, log
    assert re.search(r"event=http_serving url=\S+ token=generated$", log, re.MULTILINE), log

    page = Client(runner.http_port()).get(f"/?{url.query}")
    assert page.status == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["referrer-policy"] == "no-referrer"

    api = Client(runner.http_port()).as_token(token)
    saved = api.post("/api/timers", {"name": "via_link", "schedule": "hourly", "sql": "SELECT 1"})
    assert saved.status == 200, saved.text
    # the token acts as the runner's own connection role
    with db.connect() as conn:
        assert saved.json()["created_by"] == scalar(conn, "SELECT current_user")
    listed = api.get("/api/timers")
    assert listed.status == 200
    assert [t["name"] for t in listed.json()["timers"]] == ["via_link"]
    ran = api.post("/api/timers/via_link/run").json()
    assert ran["finished"] is True and ran["ok"] is True, ran

    wrong = Client(runner.http_port()).as_token(token[:-1] + ("A" if token[-1] != "A" else "B"))
    refused = wrong.get("/api/timers")
    assert refused.status == 401
    assert refused.error.startswith("bad token: pgtimers run makes a new one each time it starts")
    assert Client(runner.http_port()).get("/api/timers").status == 401
    # the console's requests and their errors did not write it again
    assert runner.log().count(token) == 1


def test_each_start_makes_another_token(start: Start) -> None:
    first, second = start(), start()
    for runner in (first, second):
        runner.wait_for("pgtimers: console: ")
    (a,), (b,) = LINK.findall(first.log()), LINK.findall(second.log())
    assert a.split("token=")[1] != b.split("token=")[1]
    old = Client(second.http_port()).as_token(a.split("token=")[1])
    assert old.get("/api/stats").status == 401


def test_a_set_token_is_used_and_none_is_made(start: Start) -> None:
    runner = start(env=_env(**{TOKEN_ENV: TOKEN}))
    log = runner.log()
    assert "?token=" not in log and "token=generated" not in log and TOKEN not in log, log
    assert Client(runner.http_port()).as_token(TOKEN).get("/api/timers").status == 200
    refused = Client(runner.http_port()).as_token("x" * 43).get("/api/timers")
    assert (refused.status, refused.error) == (401, "bad token")


def test_anonymous_loopback_makes_no_token(start: Start) -> None:
    runner = start(["--http-anonymous"])
    log = runner.log()
    assert "?token=" not in log and "token=generated" not in log, log
    assert Client(runner.http_port()).get("/api/timers").status == 200


def test_basic_still_works_next_to_the_made_token(start: Start, basic: bool) -> None:
    runner = start()
    reader = Client(runner.http_port()).as_basic("pgt_http_reader")
    assert reader.get("/api/timers").status == 200
    refused = Client(runner.http_port()).as_basic("pgt_http_reader", "wrong").get("/api/timers")
    assert refused.status == 401


def test_run_token_is_made_only_when_none_is_set() -> None:
    made = HttpSettings().with_run_token()
    assert made.token_generated and made.token is not None and len(made.token) >= 40
    assert HttpSettings().with_run_token().token != made.token
    assert HttpSettings(token=TOKEN).with_run_token() == HttpSettings(token=TOKEN)
    anonymous = HttpSettings(allow_anonymous_loopback=True)
    assert anonymous.with_run_token() == anonymous


def test_the_link_names_an_address_a_browser_can_open() -> None:
    assert console_link("0.0.0.0", 8089, "a-b_c") == "http://127.0.0.1:8089/?token=a-b_c"
    assert console_link("::", 8089, "t") == "http://[::1]:8089/?token=t"
    assert console_link("::1", 1, "t") == "http://[::1]:1/?token=t"
    assert console_link("db.example", 80, "t") == "http://db.example:80/?token=t"
