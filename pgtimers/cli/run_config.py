"""Settings of `pgtimers run`: flag, then config file (TOML), then environment, then default."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgtimers.cli.dsn import given_dsns
from pgtimers.http.settings import CONFIG_KEYS as HTTP_CONFIG_KEYS
from pgtimers.runner.budget import MIN_CAP
from pgtimers.runner.notify_config import NotifyConfigError, NotifyTarget, parse_sections

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (dependency: tomli; python_version < "3.11")
    import tomli as tomllib

DEFAULT_WORKERS = 2
MIN_WORKERS, MAX_WORKERS = 1, 64
WORKERS_ENV = "PGTIMERS_WORKERS"
MAX_CONNECTIONS_ENV = "PGTIMERS_MAX_CONNECTIONS"
MAX_MAX_CONNECTIONS = 10_000
CONFIG_KEYS = (
    "workers",
    "max_connections",
    "dsn",
    "all_databases",
    "timezone",
    "http",
    "owner_dsns",
    "notify",
    *HTTP_CONFIG_KEYS,
)


class ConfigError(ValueError):
    """A bad setting; the message names the flag, key or variable it came from."""


@dataclass(frozen=True)
class RunConfig:
    """What `pgtimers run` was asked to do."""

    dsns: tuple[str, ...] = ()
    all_databases: bool = False
    workers: int = DEFAULT_WORKERS
    workers_from: str = "default"
    # connections to each server, control sessions and workers; None: derived from the
    # server's max_connections
    max_connections: int | None = None
    max_connections_from: str = "default"
    timezone: str | None = None
    http: str | None = None
    # the DSN of each timer owner's login, for autonomous timers (--owner-dsn)
    owner_dsns: Mapping[str, str] = field(default_factory=dict)
    # the webhook targets of the [[notify]] sections
    notify: tuple[NotifyTarget, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


def parse_workers(value: Any, source: str) -> int:
    """A worker count of 1..64, or ConfigError naming `source`."""
    return _whole(value, source, "workers", MIN_WORKERS, MAX_WORKERS)


def parse_max_connections(value: Any, source: str) -> int:
    """A connection budget of 2..10000 (a control session and a worker), or ConfigError
    naming `source`."""
    return _whole(value, source, "max_connections", MIN_CAP, MAX_MAX_CONNECTIONS)


def _whole(value: Any, source: str, what: str, low: int, high: int) -> int:
    if isinstance(value, bool):
        raise ConfigError(
            f"{source}: {what} must be a whole number from {low} to {high}, not {value!r}"
        )
    if isinstance(value, int):
        number = value
    else:
        text = str(value).strip()
        if not text.lstrip("-").isdigit():
            raise ConfigError(
                f"{source}: {what} must be a whole number from {low} to {high}, not {value!r}"
            )
        number = int(text)
    if not low <= number <= high:
        raise ConfigError(f"{source}: {what} must be from {low} to {high}, not {number}")
    return number


def load_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The TOML config file as a dict; unknown keys and bad types are ConfigError."""
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"--config {file}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"--config {file}: cannot read it: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config {file}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(CONFIG_KEYS))
    if unknown:
        raise ConfigError(
            f"--config {file}: unknown key {unknown[0]!r}; the keys are {', '.join(CONFIG_KEYS)}"
        )
    dsn = data.get("dsn")
    if dsn is not None and not (
        isinstance(dsn, str) or (isinstance(dsn, list) and all(isinstance(d, str) for d in dsn))
    ):
        raise ConfigError(f"--config {file}: key 'dsn' must be a string or a list of strings")
    for key in ("timezone", "http"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"--config {file}: key {key!r} must be a string")
    owners = data.get("owner_dsns", {})
    if not isinstance(owners, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in owners.items()
    ):
        raise ConfigError(
            f"--config {file}: key 'owner_dsns' must be a table of owner = \"DSN\" strings"
        )
    if "all_databases" in data and not isinstance(data["all_databases"], bool):
        raise ConfigError(f"--config {file}: key 'all_databases' must be true or false")
    if "notify" in data:
        try:
            data["notify"] = parse_sections(data["notify"], str(file))
        except NotifyConfigError as exc:
            raise ConfigError(str(exc)) from None
    return data


def file_dsns(data: Mapping[str, Any]) -> list[str]:
    """The `dsn` of a loaded config file as a list (a string is one database)."""
    dsn = data.get("dsn")
    return [dsn] if isinstance(dsn, str) else list(dsn or [])


def resolve(
    *,
    dsns: list[str] | None = None,
    all_databases: bool = False,
    workers: str | int | None = None,
    max_connections: str | int | None = None,
    timezone: str | None = None,
    http: str | None = None,
    owner_dsns: list[str] | None = None,
    config_file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> RunConfig:
    """Merge flag values, the config file and the environment into one RunConfig."""
    env = os.environ if environ is None else environ
    data = load_file(config_file) if config_file else {}
    if workers is not None:
        count, source = parse_workers(workers, "--workers"), "flag"
    elif "workers" in data:
        count = parse_workers(data["workers"], f"--config {config_file}: key 'workers'")
        source = "config"
    elif env.get(WORKERS_ENV, "").strip():
        count, source = parse_workers(env[WORKERS_ENV], WORKERS_ENV), "environment"
    else:
        count, source = DEFAULT_WORKERS, "default"
    budget, budget_from = _max_connections(max_connections, data, config_file, env)
    return RunConfig(
        dsns=tuple(given_dsns(dsns, file_dsns(data), env)),
        all_databases=all_databases or bool(data.get("all_databases", False)),
        workers=count,
        workers_from=source,
        max_connections=budget,
        max_connections_from=budget_from,
        timezone=timezone or data.get("timezone"),
        http=http or data.get("http"),
        # a flag's owner wins over the config file's
        owner_dsns={**data.get("owner_dsns", {}), **parse_owner_dsns(owner_dsns or [])},
        notify=data.get("notify", ()),
        extra={k: data[k] for k in HTTP_CONFIG_KEYS if k in data},
    )


def parse_owner_dsns(values: list[str]) -> dict[str, str]:
    """--owner-dsn OWNER=DSN flags as {owner: DSN}, or ConfigError naming the bad one."""
    found: dict[str, str] = {}
    for value in values:
        owner, sep, dsn = value.partition("=")
        if not sep or not owner.strip() or not dsn.strip():
            raise ConfigError(
                f"--owner-dsn {value!r}: expected OWNER=DSN, the timer owner's role name and the"
                " DSN the runner logs in as it with (postgresql://owner@host/db)"
            )
        found[owner.strip()] = dsn.strip()
    return found


def _max_connections(
    flag: str | int | None, data: Mapping[str, Any], config_file: str | None, env: Mapping[str, str]
) -> tuple[int | None, str]:
    """The connection budget and where it came from: flag, config, environment, default."""
    if flag is not None:
        return parse_max_connections(flag, "--max-connections"), "flag"
    if "max_connections" in data:
        key = f"--config {config_file}: key 'max_connections'"
        return parse_max_connections(data["max_connections"], key), "config"
    if env.get(MAX_CONNECTIONS_ENV, "").strip():
        value = parse_max_connections(env[MAX_CONNECTIONS_ENV], MAX_CONNECTIONS_ENV)
        return value, "environment"
    return None, "default"
