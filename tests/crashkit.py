"""The harness of the crash tests: run a writer child, read its lines, SIGKILL it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable


def kill_after(script: str, args: list[str], lines: int, on_line: Callable[[str], None],
               pause: float = 0.0) -> int:
    """Run ``script`` (a child that prints ``ready``, then one line per step) with ``args``;
    hand each line to ``on_line`` until ``lines`` were read, wait ``pause`` seconds, SIGKILL
    the child, and hand over the whole lines already in the pipe: they were printed before
    the kill, so what they acknowledge counts. Returns the lines read. A child that dies on
    its own (an error) fails the test with its stderr."""
    proc = subprocess.Popen([sys.executable, script, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        seen = 0
        while seen < lines:
            line = proc.stdout.readline()
            assert line.endswith("\n"), f"child died early: {proc.stderr.read()}"
            on_line(line)
            seen += 1
        if pause:
            time.sleep(pause)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        for line in proc.stdout.read().splitlines(keepends=True):
            if line.endswith("\n"):
                on_line(line)
                seen += 1
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
        return seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
