"""HTTP Basic password guessing, slowed down per role.

Each role may have FREE_TRIES password checks in a row that did not succeed;
after that its password is checked at most once per window, the window
doubling from 1 s up to MAX_WAIT_SECONDS (1, 2, 4, 8, 10, 10, ... s). A try
that comes before its window opens is a 429 with Retry-After, answered without
asking PostgreSQL. A success, or 15 minutes without tries, starts the role afresh.

Why a 429 and not a delay: a delayed answer still lets a client guess as fast
as it opens connections, and each one held costs the server; refusing at once
bounds the guesses per role to one per window whatever the concurrency. A try
is counted when it is let through, before its answer, for the same reason.

Why a legitimate user is not locked out for long: a window is at most
MAX_WAIT_SECONDS, so an attacker who stops frees the role within that; keeping
it shut costs the attacker a request every window, without end. And a password
this server has already verified for the role is never throttled (the caller
checks that first), so a user who signed in before the attack is not held up.
The price of "a success starts afresh" is 5 more tries for a guesser each time
the real password is checked, which a verified password's cache (60 s) bounds.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass

from pgtimers.http.errors import HttpError

FREE_TRIES = 5
FIRST_WAIT_SECONDS = 1.0
MAX_WAIT_SECONDS = 10.0
FORGET_SECONDS = 900.0
# An attacker could make up role names to push a throttled role out; each made-up
# name costs one refused login to the database, so flushing this many buys 5 tries.
MAX_ROLES = 4096


@dataclass
class _Tries:
    count: int
    last: float
    next_check: float


class BasicThrottle:
    """Failed-in-a-row password checks per role, and when the next may run."""

    def __init__(self) -> None:
        self._roles: OrderedDict[str, _Tries] = OrderedDict()

    def admit(self, role: str) -> None:
        """Count a password check for `role`, or raise a 429 when it must wait."""
        now = time.monotonic()
        tries = self._roles.get(role)
        if tries is not None and now - tries.last > FORGET_SECONDS:
            tries = None
        if tries is None:
            tries = _Tries(0, now, now)
        elif tries.count >= FREE_TRIES and now < tries.next_check:
            wait = math.ceil(tries.next_check - now)
            raise HttpError(
                429,
                f"too many failed sign-ins for role '{role}': try again in {wait} s",
                {"Retry-After": str(wait)},
            )
        tries.count += 1
        tries.last = now
        if tries.count >= FREE_TRIES:
            # the exponent is clamped: a long attack's count would overflow a float
            doubling = FIRST_WAIT_SECONDS * 2 ** min(tries.count - FREE_TRIES, 16)
            tries.next_check = now + min(doubling, MAX_WAIT_SECONDS)
        self._roles[role] = tries
        self._roles.move_to_end(role)
        while len(self._roles) > MAX_ROLES:
            self._roles.popitem(last=False)

    def succeeded(self, role: str) -> None:
        """The role's password was right: it starts afresh."""
        self._roles.pop(role, None)

    def forgive(self, role: str) -> None:
        """The check said nothing about the password (the database was unreachable)."""
        tries = self._roles.get(role)
        if tries is not None and tries.count > 0:
            tries.count -= 1
