"""schemathesis against the OpenAPI document and a live server on 127.0.0.1: no
input makes a 500, and every answer matches the document."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import schemathesis
else:
    schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings

from pgtimers.http.openapi import document
from tests.conftest import Database
from tests.integration.http.conftest import TOKEN, Served

SCHEMA = schemathesis.openapi.from_dict(document())
# Valid and invalid inputs both; NUL characters too. No example database on disk.
SCHEMA.config.generation.update(
    modes=list(schemathesis.GenerationMode), allow_x00=True, database="none"
)
CALLS: list[int] = []


@pytest.fixture
def live(db: Database, serve: Callable[..., Served]) -> Iterator[str]:
    with db.connect() as conn:
        conn.execute("SELECT timers.save('t1', 'hourly', 'SELECT 1')")
        conn.execute("CREATE TABLE ev (at date) PARTITION BY RANGE (at)")
        # keyed timers armed, held and superseded, so /api/keyed answers rows of each
        conn.execute("SELECT timers.arm('job_1:task:file:2027', '2030-01-01Z', 'SELECT 1')")
        conn.execute("SELECT timers.arm('job_1:deadline:at_risk:2027', '2030-01-02Z', 'SELECT 1')")
        conn.execute("SELECT timers.hold('job_1:deadline:at_risk:2027', 'ask_1')")
        conn.execute(
            "SELECT timers.arm('clk_1#US:rung:notice 30d:2027@0', '2030-01-03Z', 'SELECT 1')"
        )
        conn.execute("SELECT timers.move('clk_1#US:rung:notice 30d:2027@0', '2030-02-03Z')")
    yield f"http://127.0.0.1:{serve([db.dsn]).port}"


@SCHEMA.parametrize()
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api(case: schemathesis.Case[Any], live: str) -> None:
    response = case.call_and_validate(
        base_url=live,
        headers={"Authorization": f"Bearer {TOKEN}"},
        # A schedule or SQL the document cannot describe is rightly a 400.
        excluded_checks=[schemathesis.checks.positive_data_acceptance],
    )
    assert response.status_code < 500 or response.status_code == 503, response.text
