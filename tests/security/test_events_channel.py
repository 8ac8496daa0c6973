"""`NOTIFY pgtimers_events` is a hint, not a record (security review, issue 26, item 7d).

Anyone who can connect can send a payload on the channel, so the docs must say so
and point a listener to what only pgtimers writes. This checks both halves: a role
with no rights does forge an event a listener receives, the docs say the channel
is a hint, and every relation they name as the durable source exists and cannot
be changed by the roles whose SQL pgtimers runs (admins, readers, anyone).
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from tests.conftest import Database
from tests.security.helpers import ALICE, NOBODY, connect

DOCS = Path(__file__).resolve().parents[2] / "docs"
FORGED = '{"database": "app", "timer": "payout", "event": "failed", "attempt": 1}'


def _hint_paragraph(doc: str, marker: str) -> str:
    text = (DOCS / doc).read_text()
    assert marker in text, f"{doc} does not say the events channel is a hint ({marker!r})"
    start = text.index(marker)
    return text[start : text.find("\n\n", start)]


def _named_sources(paragraph: str) -> set[str]:
    return set(re.findall(r"`(timers\.[a-z_]+)`", paragraph))


def test_anyone_can_forge_an_event(db: Database) -> None:
    with connect(db) as listener, connect(db, NOBODY) as nobody:
        listener.execute("LISTEN pgtimers_events")
        nobody.execute("SELECT pg_notify('pgtimers_events', %s)", [FORGED])
        received = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert received == [FORGED]


@pytest.mark.parametrize(
    ("doc", "marker"),
    [
        ("running.md", "**The channel is a hint, not a record.**"),
        ("security.md", "## The events channel is a hint"),
    ],
)
def test_the_docs_send_a_listener_to_what_only_pgtimers_writes(
    db: Database, doc: str, marker: str
) -> None:
    paragraph = _hint_paragraph(doc, marker)
    assert "any role that\ncan connect" in paragraph or "Any role that can connect" in paragraph
    sources = _named_sources(paragraph)
    assert {"timers.runs", "timers.trouble", "timers.status"} <= sources, sources
    with connect(db) as su:
        for source in sorted(sources):
            assert su.execute("SELECT to_regclass(%s)", [source]).fetchone() != (None,), source
            for role in ("pgtimers_admin", "pgtimers_reader", "public", ALICE, NOBODY):
                row = su.execute(
                    "SELECT has_table_privilege(%s, %s, 'INSERT, UPDATE, DELETE, TRUNCATE')",
                    [role, source],
                ).fetchone()
                assert row == (False,), f"{role} may change {source}, which the docs call trusted"
    # and a timer's owner really cannot write a run into the record
    with connect(db, ALICE) as alice, pytest.raises(psycopg.errors.InsufficientPrivilege):
        alice.execute("INSERT INTO timers.runs (timer) VALUES ('payout')")
