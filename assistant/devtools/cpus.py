"""Which cores a benchmark's processes run on: `bench qos --vllm --engine-cpus LIST|shared`.

vLLM's CPU build keeps every core it can reach busy, so on a shared machine it starves the app
it is measured against; a GPU engine takes none of the app's cores. The bench therefore puts
the engine on cores of its own by default, and reports where each process really ran, read
back from the kernel (`/proc/<pid>/status`, Cpus_allowed_list), not what was asked for.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SHARED = "shared"
"""`--engine-cpus shared`: the engine, the bench, the app and the worker on every core."""


def parse_cpu_list(text: str) -> frozenset[int]:
    """A kernel CPU list ("1", "0-1,3") as a set of core numbers; ValueError if it is not one."""
    cores: set[int] = set()
    for part in text.strip().split(","):
        first, dash, last = part.strip().partition("-")
        try:
            lo, hi = int(first), int(last if dash else first)
        except ValueError:
            raise ValueError(f"not a CPU list: {text!r} (say e.g. 1, 1-3 or 1,3)") from None
        if lo < 0 or hi < lo:
            raise ValueError(f"not a CPU range: {part!r} in {text!r}")
        cores.update(range(lo, hi + 1))
    return frozenset(cores)


def format_cpu_list(cores: frozenset[int] | set[int]) -> str:
    """The kernel's own spelling: runs of consecutive cores as "a-b", joined by commas."""
    ordered = sorted(cores)
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(runs)


@dataclass(frozen=True)
class Placement:
    """Where the engine goes and where the rest (bench, app, worker) stays."""

    engine: frozenset[int] | None
    """The engine's cores; None: shared, every process on every core."""
    rest: frozenset[int] | None
    """The bench's, the app's and the worker's cores; None when shared."""
    why: str
    """How it was decided, for the report."""


def placement(request: str | None, available: frozenset[int]) -> Placement:
    """`--engine-cpus`: None (the default) gives the engine all but the first of `available`
    where there are at least two; "shared" or a lone core shares them all; a LIST must be a
    subset of `available` that leaves at least one core for the rest. ValueError otherwise."""
    if request is not None and request.strip() == SHARED:
        return Placement(None, None, "shared (asked for)")
    if request is None:
        if len(available) < 2:
            return Placement(None, None, "shared (only one core)")
        first = min(available)
        return Placement(available - {first}, frozenset({first}), "default: all but the first")
    engine = parse_cpu_list(request)
    if not engine <= available:
        missing = format_cpu_list(engine - available)
        raise ValueError(
            f"--engine-cpus {request}: core(s) {missing} not available to this process"
        )
    rest = available - engine
    if not rest:
        raise ValueError(f"--engine-cpus {request}: no core left for the bench, app and worker")
    return Placement(engine, rest, f"--engine-cpus {request}")


def cpus_allowed(pid: int) -> str | None:
    """The cores any thread of `pid` may run on, as the kernel has them (the union of each
    thread's Cpus_allowed_list); None if it is gone."""
    cores: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        with contextlib.suppress(OSError):
            for line in (task / "status").read_text().splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    cores |= parse_cpu_list(line.split(":", 1)[1])
    return format_cpu_list(cores) if cores else None


def descendants(pid: int) -> list[int]:
    """Every living process under `pid` (children, theirs, ...), read from /proc."""
    parent_of: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name (field 2) may hold spaces and parentheses: split after its end
        fields = stat.rsplit(")", 1)[1].split()
        parent_of[int(entry.name)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = sorted(p for p, pp in parent_of.items() if pp == parent)
        found += children
        frontier += children
    return sorted(found)


def tree_cpus(pid: int) -> list[dict[str, int | str | None]]:
    """`pid` and each of its descendants: its pid, name and the cores it may run on."""
    out: list[dict[str, int | str | None]] = []
    for p in [pid, *descendants(pid)]:
        try:
            name = Path(f"/proc/{p}/comm").read_text().strip()
        except OSError:
            name = None
        out.append({"pid": p, "name": name, "cpus": cpus_allowed(p)})
    return out


@contextlib.contextmanager
def pinned(cores: frozenset[int] | None) -> Iterator[None]:
    """Every thread of this process (and what they start meanwhile) on `cores`; as they were
    after. None: as is. Each thread has an affinity of its own, so each is set."""
    if cores is None:
        yield
        return
    before: dict[int, set[int]] = {}
    for task in Path("/proc/self/task").iterdir():
        tid = int(task.name)
        with contextlib.suppress(OSError):  # a thread may end meanwhile
            before[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cores)
    try:
        yield
    finally:
        for tid, was in before.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, was)


def pin_to(cores: frozenset[int] | None):
    """A `preexec_fn` that puts the child (and so its own children) on `cores`; None: as is."""
    if cores is None:
        return None
    return lambda: os.sched_setaffinity(0, cores)
