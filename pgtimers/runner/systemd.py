"""systemd's notify protocol (Type=notify, WatchdogSec=): one datagram to $NOTIFY_SOCKET
per state, no library needed. Does nothing when not started by systemd."""

from __future__ import annotations

import os
import socket


def _address() -> str | None:
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return None
    # an abstract socket is written with a leading '@'
    return "\0" + path[1:] if path.startswith("@") else path


def notify(state: str) -> bool:
    """Send one state line ("READY=1", "WATCHDOG=1", "STATUS=...", "STOPPING=1");
    whether systemd listens."""
    address = _address()
    if address is None:
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(address)
            sock.sendall(state.encode())
        except OSError:
            return False
    return True


def watchdog_interval() -> float | None:
    """How often to say WATCHDOG=1 (half of WatchdogSec), or None without a watchdog.
    systemd sets WATCHDOG_USEC, and WATCHDOG_PID when it is meant for another process."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or not usec.isdigit() or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 1e6 / 2
