"""Inject model faults into whole protocol runs and check each one lands on its own step.

    python benchmarks/fault_campaign.py [--episodes 3] [--period 1]

For every game and pathway (none, history, summary) a run with `fault/<game>`: the fault provider
cycles through all twelve kinds (timeouts, 429 with and without retry-after, 500, connection
errors, empty, garbage, missing score, huge, wrong language, invalid UTF-8, prompt injection) on
every `--period`-th request. Then a second pass where the model is down (retries exhausted) until
it comes back: each run stops cleanly and, resumed, must equal its uninterrupted twin. Prints the
faults injected by kind, the steps checked and the mismatches (there must be none).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

import s3gym_games as games  # noqa: E402
from s3gym_tui.engine.runner import ProtocolRunner  # noqa: E402
from s3gym_tui.models import RunConfig  # noqa: E402
from s3gym_tui.providers import fault  # noqa: E402
from s3gym_tui.store import Store, audit  # noqa: E402
from tests.engine.helpers import trajectory  # noqa: E402
from tests.reliability.support import expected_fault, fault_evidence  # noqa: E402


def run(path: Path, config: RunConfig, run_id: str = "f") -> tuple[Store, object]:
    store = Store(path)
    created = store.runs.create_run(config, run_id=run_id)
    return store, asyncio.run(ProtocolRunner(store, created, backoff_base_s=0).run_protocol())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=3, help="exploration episodes per run")
    parser.add_argument("--period", type=int, default=1, help="fault every n-th request")
    args = parser.parse_args()
    injected: Counter = Counter()
    problems: list[str] = []
    steps = runs = stopped_resumed = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for game in games.names():
            for pathway in ("none", "history", "summary"):
                fault.reset()
                fault.SETTINGS.period = args.period
                fault.SETTINGS.huge_chars = 20_000
                config = RunConfig(model=f"fault/{game}", game=game, pathway=pathway,
                                   explore_episodes=args.episodes, eval_every=1, eval_episodes=2, max_retries=2)
                try:
                    store, final = run(Path(tmp) / f"{game}-{pathway}.db", config)
                except Exception as exc:  # noqa: BLE001 - reported as a problem
                    problems.append(f"{game}/{pathway}: {type(exc).__name__}: {exc}")
                    continue
                runs += 1
                if final.status != "finished" or not audit(store).ok:
                    problems.append(f"{game}/{pathway}: status {final.status}, audit ok {audit(store).ok}")
                for episode in store.episodes.list("f"):
                    for step in store.episodes.steps(episode.id):
                        kind = expected_fault(episode.seed, step.index)
                        steps += 1
                        if kind:
                            injected[kind] += 1
                        problems += [f"{game}/{pathway} {episode.id}#{step.index}: {p}"
                                     for p in fault_evidence(kind, step)]
                # the model goes down on its first transient fault, then comes back: stop, resume
                fault.SETTINGS.transient_attempts = 99
                down, stopped = run(Path(tmp) / f"{game}-{pathway}-down.db", config)
                fault.SETTINGS.transient_attempts = 1
                resumed = asyncio.run(ProtocolRunner(down, down.runs.get_run("f"), backoff_base_s=0).run_protocol())
                if stopped.status != "stopped" or resumed.status != "finished" or \
                        trajectory(down, "f") != trajectory(store, "f"):
                    problems.append(f"{game}/{pathway}: stop ({stopped.status}) and resume ({resumed.status}) "
                                    f"differ from the uninterrupted run")
                else:
                    stopped_resumed += 1
                store.close()
                down.close()
    fault.reset()
    seconds = time.perf_counter() - started
    print_table("model faults injected into protocol runs", ["figure", "value"], [
        ["runs (7 games x 3 pathways)", runs],
        ["steps checked", steps],
        ["faults injected on steps", sum(injected.values())],
        *[[f"  {kind}", n] for kind, n in sorted(injected.items())],
        ["runs stopped by a dead model, resumed, equal", stopped_resumed],
        ["faults not on their step / runs not finished", len(problems)],
        ["seconds", seconds],
    ])
    for problem in problems[:20]:
        print("PROBLEM", problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
