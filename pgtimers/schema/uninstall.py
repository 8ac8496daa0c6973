"""Uninstall pgtimers from one database: what is there, what would go with it, and the drop.

Shared by `pgtimers uninstall` and `alembic downgrade base`. Both drop pgtimers' schemas
(every timer, run and executor is in them) and then the cluster-wide roles, but only when
no other database of the cluster still uses pgtimers: each other database is connected to
and checked, and one that cannot be checked keeps the roles."""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pgtimers.queries import beside
from pgtimers.schema.install import INSTALL_LOCK_KEY, pinned

SCHEMAS = ("timers", "timers_exec")
ROLES = ("pgtimers_admin", "pgtimers_reader", "pgtimers_runner")
LOCK_TIMEOUT = "60s"

_q = beside(__file__, "uninstall.sql")


@dataclass(frozen=True)
class OtherDatabase:
    """Another database of the cluster: whether it uses pgtimers (None: could not tell)."""

    name: str
    uses_pgtimers: bool | None
    why: str


@dataclass(frozen=True)
class RolesVerdict:
    """Whether the cluster-wide roles go, and why they stay when they do."""

    drop: bool
    reasons: list[str] = field(default_factory=list)


def _names(names: list[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def roles_verdict(
    existing: list[str], others: list[OtherDatabase], keep_roles: bool
) -> RolesVerdict:
    """Drop the roles only when asked to, they exist, and every other database was checked
    and found without pgtimers."""
    if not existing:
        return RolesVerdict(False, ["there are none"])
    if keep_roles:
        return RolesVerdict(False, ["--keep-roles"])
    by_why: dict[str, list[str]] = {}
    for other in others:
        if other.uses_pgtimers is not False:
            key = other.why if other.uses_pgtimers else f"could not be checked: {other.why}"
            by_why.setdefault(key, []).append(other.name)
    reasons = [f"{why}: {_names(names)}" for why, names in by_why.items()]
    return RolesVerdict(not reasons, reasons)


def _check(dsn: str, name: str, allows: bool, granting: set[str]) -> OtherDatabase:
    rights = name in granting
    if not allows:
        if rights:
            return OtherDatabase(
                name, None, "it allows no connections, and pgtimers' roles hold rights in it"
            )
        return OtherDatabase(
            name, False, "allows no connections; pgtimers' roles hold no rights in it"
        )
    try:
        with psycopg.connect(pinned(make_conninfo(dsn, dbname=name, connect_timeout=10))) as conn:
            row = conn.execute(_q("has_schema"), {"schemas": list(SCHEMAS)}).fetchone()
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return OtherDatabase(name, None, f"cannot connect ({first})")
    if row and row[0]:
        return OtherDatabase(name, True, "other databases still have pgtimers")
    if rights:
        return OtherDatabase(name, True, "pgtimers' roles hold rights in other databases")
    return OtherDatabase(name, False, "no pgtimers")


def other_databases(conn: psycopg.Connection, dsn: str) -> list[OtherDatabase]:
    """Every other database of the cluster, each connected to (with the DSN's credentials)."""
    granting = {r[0] for r in conn.execute(_q("databases_granting_roles"), {"roles": list(ROLES)})}
    found = conn.execute(_q("other_databases")).fetchall()
    checked = [_check(dsn, name, allows, granting) for name, allows in found]
    # a database dropped while we looked is no database that uses pgtimers
    still = {r[0] for r in conn.execute(_q("other_databases"))}
    return [o for o in checked if o.uses_pgtimers is False or o.name in still]


@dataclass
class Plan:
    """What an uninstall of one database would drop and keep."""

    database: str
    schemas: list[str]
    not_owned: list[tuple[str, str]]  # (schema, owner) the current role may not drop
    revision: str | None
    timers: int
    executors: list[tuple[str, str]]  # (function, owning role)
    live_runners: int
    outside: list[str]  # objects of other schemas that depend on pgtimers' objects
    roles: dict[str, list[str]]  # each existing role and its members
    others: list[OtherDatabase]
    verdict: RolesVerdict
    user: str  # the role the uninstall runs as
    database_roles: list[str] = field(default_factory=list)  # this database's own roles
    keep_roles: bool = False

    def refusals(
        self, force: bool, cascade: bool, how: tuple[str, str] = ("--force", "--cascade")
    ) -> list[str]:
        """Why the uninstall must not go ahead as asked (`how`: the options that would let
        it); empty when it may."""
        refused = [
            f"role {self.user} may not drop schema {schema}: it is owned by {owner}"
            f" (connect as {owner}, the role that installed pgtimers, or a superuser)"
            for schema, owner in self.not_owned
        ]
        if self.live_runners and not force:
            refused.append(
                f"{self.live_runners} runner(s) serve database {self.database} now:"
                f" stop them first (or pass {how[0]})"
            )
        if self.outside and not cascade:
            refused.append(
                "objects outside pgtimers depend on it and would be dropped with it: "
                + "; ".join(self.outside)
                + f" (drop or change them first, or pass {how[1]} to drop them too)"
            )
        return refused

    def describe(self) -> list[str]:
        """What will be dropped and kept, one line each."""
        lines = [f"database {self.database}:"]
        if not self.schemas:
            lines.append("  pgtimers is not installed here (no schema timers or timers_exec)")
        lines += [f"  drop schema {schema}{self._contents(schema)}" for schema in self.schemas]
        lines += [f"  drop {item} (it depends on pgtimers)" for item in self.outside]
        names = ", ".join(self.roles)
        if self.verdict.drop:
            members = sorted({m for ms in self.roles.values() for m in ms})
            lost = f" (roles losing membership: {', '.join(members)})" if members else ""
            lines.append(f"  drop roles {names}{lost}")
        elif self.roles:
            lines.append(f"  keep roles {names}: {'; '.join(self.verdict.reasons)}")
        if self.database_roles:
            own = ", ".join(self.database_roles)
            lines.append(
                f"  keep this database's roles {own}: --keep-roles"
                if self.keep_roles
                else f"  drop this database's roles {own}"
            )
        return lines

    def _contents(self, schema: str) -> str:
        if schema == "timers":
            at = f", revision {self.revision}" if self.revision else ""
            return f" ({self.timers} timer(s) with their history{at})"
        if schema == "timers_exec" and self.executors:
            owners = sorted({owner for _, owner in self.executors})
            return f" ({len(self.executors)} executor(s), owned by {', '.join(owners)})"
        return ""


def _scalar(conn: psycopg.Connection, name: str, params: dict[str, object] | None = None) -> object:
    row = conn.execute(_q(name), params).fetchone()
    return None if row is None else row[0]


def plan(conn: psycopg.Connection, dsn: str, keep_roles: bool = False) -> Plan:
    """Look at the database of `conn` (and, unless the roles are kept, at every other
    database of the cluster); nothing is changed."""
    found = conn.execute(_q("schemas"), {"schemas": list(SCHEMAS)}).fetchall()
    schemas = [name for name, _, _ in found]

    def has_table(name: str) -> bool:
        return bool(_scalar(conn, "has_relation", {"name": name}))

    revision = _scalar(conn, "revision") if has_table("timers.alembic_version") else None
    timers = _scalar(conn, "timer_count") if has_table("timers.timers") else 0
    live = _scalar(conn, "live_runners") if _scalar(conn, "has_live_runners_function") else 0
    roles = {r: list(m) for r, m in conn.execute(_q("roles"), {"roles": list(ROLES)})}
    others = [] if keep_roles or not roles else other_databases(conn, dsn)
    own = [r[0] for r in conn.execute(_q("database_roles"))] if has_table("timers.settings") else []
    return Plan(
        database=conn.info.dbname,
        schemas=schemas,
        not_owned=[(name, owner) for name, owner, may in found if not may],
        revision=None if revision is None else str(revision),
        timers=int(str(timers)),
        executors=[(f, o) for f, o in conn.execute(_q("executors"))],
        live_runners=int(str(live or 0)),
        outside=[r[0] for r in conn.execute(_q("outside_dependents"), {"schemas": list(SCHEMAS)})],
        roles=roles,
        others=others,
        verdict=roles_verdict(list(roles), others, keep_roles),
        user=str(_scalar(conn, "current_user")),
        database_roles=own,
        keep_roles=keep_roles,
    )


def drop(conn: psycopg.Connection, planned: Plan) -> list[str]:
    """Drop what `planned` says, in the transaction `conn` is in (the caller commits); the
    lines of what was dropped and kept. The roles are dropped in a savepoint: when
    PostgreSQL refuses (rights they still hold somewhere), they are kept and it says why."""
    conn.execute(_q("install_lock"), {"key": INSTALL_LOCK_KEY})
    conn.execute(_q("lock_timeout"), {"timeout": LOCK_TIMEOUT})
    done = []
    if planned.schemas:
        names = sql.SQL(", ").join(sql.Identifier(s) for s in planned.schemas)
        conn.execute(sql.SQL(_q("drop_schemas")).format(names))
        done += [f"dropped schema {s}{planned._contents(s)}" for s in planned.schemas]
        done += [f"dropped {item}" for item in planned.outside]
    if planned.database_roles and not planned.keep_roles:
        done.append(_drop_roles(conn, planned.database_roles, "this database's roles"))
    if not planned.verdict.drop:
        if planned.roles:
            done.append(
                f"kept roles {', '.join(planned.roles)}: " + "; ".join(planned.verdict.reasons)
            )
        return done
    done.append(_drop_roles(conn, list(planned.roles), "roles"))
    return done


def _drop_roles(conn: psycopg.Connection, names: list[str], what: str) -> str:
    """Drop roles in a savepoint; when PostgreSQL refuses (rights they still hold
    somewhere), they are kept, and the line says why."""
    roles = sql.SQL(", ").join(sql.Identifier(r) for r in names)
    try:
        with conn.transaction():
            conn.execute(sql.SQL(_q("drop_roles")).format(roles))
    except (psycopg.errors.DependentObjectsStillExist, psycopg.errors.InsufficientPrivilege) as exc:
        why = exc.diag.message_primary or str(exc)
        detail = (exc.diag.message_detail or "").replace("\n", "; ")
        return f"kept {what} {', '.join(names)}: {why}" + (f" ({detail})" if detail else "")
    return f"dropped {what} {', '.join(names)}"


def only_to_base() -> None:
    """The downgrade of every pgtimers revision: the migrations are forward-only, so the
    one way back is `alembic downgrade base`, which uninstalls pgtimers (env.py drops it
    all once the last revision is undone); any other target is refused, changing nothing."""
    from alembic import context
    from alembic.util import CommandError

    try:
        target = context.get_revision_argument()
    except Exception:  # a relative or unknown target: not base, whatever it is
        target = "?"
    if target is not None:
        raise CommandError(
            "pgtimers migrations are forward-only: there is no going back to a revision."
            " `alembic downgrade base` uninstalls pgtimers (its schemas, every timer and its"
            " history); nothing changed"
        )
