"""`pgtimers run` as a subprocess of a test: its log in a file, waits on that log, a stop."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

PYTHON = sys.executable


class RunnerProcess:
    """One `pgtimers run ARGS` subprocess; stdout and stderr go to a file the test can read."""

    def __init__(
        self,
        args: list[str],
        log: Path,
        env: dict[str, str] | None = None,
        unset: Iterable[str] = (),
    ) -> None:
        """Start it with this environment plus `env`, less the variables named in `unset`."""
        self.log_path = log
        self._log = log.open("w")
        dropped = set(unset)
        environ = {k: v for k, v in os.environ.items() if k not in dropped}
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "pgtimers", "run", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**environ, **(env or {})},
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_for(self, text: str, timeout: float = 20.0) -> None:
        """Until `text` is in the log; AssertionError if the runner exits or time runs out."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if self.proc.poll() is not None:
                raise AssertionError(f"runner exited ({self.proc.returncode}):\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} in the runner log:\n{self.log()}")
            time.sleep(0.02)

    def http_url(self) -> str:
        """The URL of `--http` from the runner's http_serving line."""
        found = re.search(r"event=http_serving url=(\S+)", self.log())
        assert found, self.log()
        return found.group(1)

    def http_port(self) -> int:
        """The port of `--http 127.0.0.1:0` from the runner's http_serving line."""
        found = re.search(r"event=http_serving url=http://127\.0\.0\.1:(\d+)", self.log())
        assert found, self.log()
        return int(found.group(1))

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then the exit code; subprocess.TimeoutExpired if it has not exited."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def terminate(self, timeout: float = 20.0) -> None:
        """SIGTERM, and SIGKILL if it is still running `timeout` s later: an end for a test
        that checks nothing about how the runner ends."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
