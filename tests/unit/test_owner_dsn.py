"""The owner's DSN of an autonomous run: the runner's, as the owner, never its password;
--owner-dsn over it, always in the runner's database."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from pgtimers.cli.run_config import ConfigError, parse_owner_dsns, resolve
from pgtimers.runner.autonomous import owner_dsn


def test_the_runners_dsn_as_the_owner_without_the_runners_password() -> None:
    got = conninfo_to_dict(owner_dsn("postgresql://ticker:s3cret@db:5433/app", "app_owner", {}))
    assert got == {"user": "app_owner", "host": "db", "port": "5433", "dbname": "app"}


def test_an_owner_that_is_the_runners_login_keeps_its_password() -> None:
    got = conninfo_to_dict(owner_dsn("postgresql://ticker:s3cret@db/app", "ticker", {}))
    assert got == {"user": "ticker", "password": "s3cret", "host": "db", "dbname": "app"}


def test_a_configured_owner_dsn_goes_over_it_in_the_runners_database() -> None:
    given = {"bob": "host=other password=pw sslmode=require dbname=elsewhere"}
    got = conninfo_to_dict(owner_dsn("host=db dbname=app user=ticker", "bob", given))
    assert got == {
        "host": "other",
        "dbname": "app",
        "user": "bob",
        "password": "pw",
        "sslmode": "require",
    }
    # another owner is not given bob's
    assert "password" not in conninfo_to_dict(owner_dsn("host=db dbname=app", "carol", given))


def test_owner_dsn_flags_name_the_bad_one() -> None:
    assert parse_owner_dsns(["bob=host=x user=bob", " carol = service=c "]) == {
        "bob": "host=x user=bob",
        "carol": "service=c",
    }
    for bad in ("bob", "=host=x", "bob="):
        with pytest.raises(ConfigError, match="--owner-dsn"):
            parse_owner_dsns([bad])


def test_owner_dsns_in_the_config_file_and_the_flag_over_them(tmp_path: Path) -> None:
    config = tmp_path / "pgtimers.toml"
    config.write_text('dsn = "host=db"\n[owner_dsns]\nbob = "host=b"\ncarol = "host=c"\n')
    got = resolve(config_file=str(config), owner_dsns=["bob=host=flag"], environ={})
    assert got.owner_dsns == {"bob": "host=flag", "carol": "host=c"}
    config.write_text('dsn = "host=db"\nowner_dsns = "bob=host=b"\n')
    with pytest.raises(ConfigError, match="key 'owner_dsns' must be a table"):
        resolve(config_file=str(config), environ={})
