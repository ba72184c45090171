"""Shared test set-up: offline litellm, no user config or database leaks into tests, the long tests first."""

import os
import sys

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("S3GYM_CONFIG", "/nonexistent/s3gym-test-config.toml")


def _share_the_cores() -> None:
    """With one pytest-xdist worker per core, each worker's model work (torch, llama.cpp, and the processes
    its tests start) gets its share of the cores (s3gym_tui/threads.py reads OMP_NUM_THREADS): two workers
    each running 2-thread models on 2 busy cores spin at their thread barriers (llama.cpp reading a prompt
    took 3.5x the CPU time and 2.9x the wall time with 2 threads as with 1 on this loaded machine)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "") or 1)
    if workers > 1:
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // workers)))


_share_the_cores()  # before any test module imports torch or loads a model


def _longest_first(item: pytest.Item) -> tuple[bool, float]:
    minutes = [float(mark.kwargs.get("minutes", 0)) for mark in item.iter_markers("slow")]
    return not minutes, -max(minutes, default=0.0)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The tests marked slow run first, those with the most `minutes` (a rough figure) first, the rest
    after them in collection order: with one worker per core (pytest-xdist, handing out one test at a time:
    `--maxschedchunk 1` in addopts) the longest tests then run side by side while the short ones fill
    the gaps, instead of one long test starting last and running alone. The sort is stable and the same
    in every worker, as xdist needs."""
    items.sort(key=_longest_first)


_CPU_LOG = os.environ.get("S3GYM_TEST_CPU_LOG")  # a folder: each worker writes the CPU its tests took there


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With S3GYM_TEST_CPU_LOG set, each test's CPU seconds (its worker's own, and the processes it started
    and waited for) and wall seconds, set-up and tear-down included, one line a test: what a loaded machine
    does not distort, for finding where the suite's time goes (benchmarks/suite_cpu.py sums it by file).
    The started processes include the `s3gym` processes tests/cli_fork.py forks from its server (and the
    server's own CPU), which are not this process's children."""
    if not _CPU_LOG:
        yield
        return
    import resource
    import time

    def cpu(who: int) -> float:
        usage = resource.getrusage(who)
        seconds = usage.ru_utime + usage.ru_stime
        if who == resource.RUSAGE_CHILDREN:  # the CLI processes tests/cli_fork.py forked are its server's
            forked = sys.modules.get("tests.cli_fork")
            seconds += forked.cpu_seconds() if forked is not None else 0.0
        return seconds

    own, children, wall = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN), time.monotonic()
    yield
    row = (item.nodeid, cpu(resource.RUSAGE_SELF) - own, cpu(resource.RUSAGE_CHILDREN) - children,
           time.monotonic() - wall)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    os.makedirs(_CPU_LOG, exist_ok=True)
    with open(os.path.join(_CPU_LOG, f"cpu-{worker}.tsv"), "a", encoding="utf-8") as out:
        out.write("%s\t%.3f\t%.3f\t%.3f\n" % row)


@pytest.fixture
def forked_child_runs(monkeypatch):
    """The run processes the app starts (engine/detached.py's ChildRuns.start: `python -m s3gym_tui ...`,
    detached, its output into a log) forked from tests/cli_fork.py's preloaded server instead of paying a
    fresh interpreter's `import litellm` (~4.4 s of CPU) each: real processes with their own session,
    descriptors and environment, as there (cli_fork's docstring says what differs; when the request
    differs in what matters at start-up it starts a fresh interpreter itself). For the UI tests whose
    subject is what the app does with its runs' processes, not how an OS process looks from outside
    (tests/engine/test_detached.py reads a child's command line: a fresh interpreter there)."""
    import subprocess

    from s3gym_tui.engine import detached
    from tests import cli_fork

    prefix = detached.cli_prefix()

    class _Subprocess:
        """The subprocess module as engine/detached.py sees it, its Popen routed for `python -m s3gym_tui`."""

        def __getattr__(self, name):
            return getattr(subprocess, name)

        @staticmethod
        def Popen(argv, **kwargs):
            if list(argv[:len(prefix)]) != prefix:
                return subprocess.Popen(argv, **kwargs)
            kwargs.pop("close_fds", None)  # a forked child gets its three descriptors and no others
            return cli_fork.spawn(list(argv[len(prefix):]), **kwargs)

    monkeypatch.setattr(detached, "subprocess", _Subprocess())


@pytest.fixture
def recorded_waits(monkeypatch) -> list[float]:
    """The delays the engine asks `asyncio.sleep` for (its waits before retries), recorded instead of slept:
    each call only yields to the loop once (sleep(0), which the list holds too)."""
    import asyncio

    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def record(delay, *args):
        waits.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", record)
    return waits
