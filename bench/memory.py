"""Memory and CPU measures without tracemalloc (too slow) or psutil: Linux ``/proc`` only.

* This process: ``VmHWM`` (peak resident set) from ``/proc/self/status``. Writing
  ``5`` to ``/proc/self/clear_refs`` resets the peak to the current RSS (Linux 4.0+),
  so each phase gets its own peak. Where that is refused, the peak is since start.
* A server in other processes: the sum of ``Pss`` (proportional set size, which
  shares shared memory out fairly instead of counting it once per process) from
  ``/proc/<pid>/smaps_rollup`` over a process and its children.

Systems run one after another in one process, and memory one system freed may be
reused by the next without raising the RSS. :func:`release_free_memory` (glibc's
``malloc_trim``) hands freed heap back to the OS between systems, so each system's
growth is measured from a baseline close to what the harness itself holds.

CPU: this process's from ``time.process_time`` (every thread, RocksDB's included); a
server's, the user and system time of a process and its children from
``/proc/<pid>/stat`` (in clock ticks, 10 ms on Linux: a phase of a second or more
reads it to about 1%).

Every function returns ``None`` where the figure cannot be read (not Linux, no
permission), and the report shows ``n/a``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
from pathlib import Path

_MIB = 1024.0


def _status_kib(field: str, pid: str = "self") -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_kib() -> int | None:
    """Current resident set of this process, KiB."""
    return _status_kib("VmRSS")


def peak_rss_kib() -> int | None:
    """Peak resident set of this process since start or the last :func:`reset_peak`, KiB."""
    return _status_kib("VmHWM")


def reset_peak() -> bool:
    """Reset this process's peak RSS to its current RSS; False where not supported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def release_free_memory() -> None:
    """Collect garbage and return free heap pages to the OS (glibc only; else a no-op)."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name is None:
        return
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: nothing to trim with


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1] == str(pid):
            kids.append(int(entry.name))
    return kids


def _pss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _tree_sum(pid: int, measure) -> int | None:
    """``measure(p)`` summed over ``pid`` and its direct children; None if ``pid``'s own
    is unreadable (a child that exited meanwhile is left out)."""
    total = 0
    for p in [pid, *_children(pid)]:
        value = measure(p)
        if value is None:
            if p == pid:
                return None
            continue
        total += value
    return total


def tree_pss_mb(pid: int) -> float | None:
    """Total PSS of ``pid`` and its direct children, MiB; None if unreadable."""
    kib = _tree_sum(pid, _pss_kib)
    return None if kib is None else kib / _MIB


def _cpu_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def tree_cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds of ``pid`` and its direct children (as they stand,
    children that exited are not counted); None if unreadable."""
    ticks = _tree_sum(pid, _cpu_ticks)
    return None if ticks is None else ticks / os.sysconf("SC_CLK_TCK")
