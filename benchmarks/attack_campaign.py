"""The hostile-user campaign: bad flags, bad databases and a misbehaving OpenAI-compatible server.

    python benchmarks/attack_campaign.py [--json]

Every bad flag and every bad database must give one line on stderr (no traceback), a non-zero exit
code, and leave the database byte-identical; every server fault mode must end the run finished or
stopped with its reason stored, within its timeout budget, and never store the API key.
tests/reliability/test_attack_campaign.py runs the same campaign.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("S3GYM_CONFIG", "/nonexistent/s3gym-attack.toml")
KEY = "sk-attack-canary-9f8e7d6c5b4a"


@dataclass
class Tally:
    cases: int = 0
    one_line: int = 0
    intact: int = 0
    problems: list = field(default_factory=list)

    def ok(self) -> bool:
        return not self.problems and self.cases == self.one_line == self.intact


def _cli(args: list[str]) -> tuple[int, str, str]:
    from s3gym_tui.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def _snapshot(path: Path) -> bytes:
    return path.read_bytes() if path.is_file() else b""


def _seed_db(path: Path) -> str:
    import asyncio

    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.models import RunConfig
    from s3gym_tui.store import Store

    with Store(path) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="summary",
                                              explore_episodes=2, eval_every=1, eval_episodes=1))
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
        conn = store.conn
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return run.id


def _check(tally: Tally, label: str, args: list[str], db: Path | None, codes=(1, 2, 3),
           may_succeed: bool = False) -> None:
    """The command must fail with one line (exit in `codes`, one stderr line, no traceback), or,
    with may_succeed, may also succeed when it never needed the damaged part; the file stays
    byte-identical either way."""
    before = _snapshot(db) if db else b""
    try:
        code, _, err = _cli(args)
    except BaseException as exc:  # noqa: BLE001 - a crash is the finding
        tally.cases += 1
        tally.problems.append(f"{label}: raised {type(exc).__name__}: {exc}")
        return
    tally.cases += 1
    lines = _explanation(err)
    clean_fail = code in codes and (len(lines) == 1 or (code == 1 and not lines))
    warned = len(lines) <= 1 and all(line.startswith("warning:") for line in lines)
    if "Traceback" not in err and (clean_fail or (may_succeed and code == 0 and warned)):
        tally.one_line += 1
    else:
        tally.problems.append(f"{label}: exit {code}, stderr {err.strip()[:300]!r}")
    if db is None or _snapshot(db) == before:
        tally.intact += 1
    else:
        tally.problems.append(f"{label}: the database changed")


def _garbage(work: Path) -> Path:
    path = work / "garbage-for-tui.db"
    path.write_bytes(os.urandom(4096))
    return path


def bad_flags(work: Path) -> Tally:
    db = work / "flags.db"
    run_id = _seed_db(db)
    d = ["--db", str(db)]
    cases = {
        "unknown command": ["frobnicate"],
        "unknown option": ["runs", "--frob", *d],
        "run unknown game": ["run", "go", *d],
        "run bad pathway": ["run", "trust", "-p", "magic", *d],
        "run trained pathway": ["run", "trust", "-p", "trained", *d],
        "run negative episodes": ["run", "trust", "--episodes", "-1", *d],
        "run huge episodes": ["run", "trust", "--episodes", "99999999", *d],
        "run zero eval every": ["run", "trust", "--eval-every", "0", *d],
        "run nan temperature": ["run", "trust", "--temperature", "nan", *d],
        "run temperature 9": ["run", "trust", "--temperature", "9", *d],
        "run zero max tokens": ["run", "trust", "--max-tokens", "0", *d],
        "run negative budget": ["run", "trust", "--history-budget", "-5", *d],
        "run timeout 0": ["run", "trust", "--timeout", "0", *d],
        "run timeout nan": ["run", "trust", "--timeout", "nan", *d],
        "run retries 99": ["run", "trust", "--max-retries", "99", *d],
        "run unknown provider": ["run", "trust", "-m", "nosuch/model", *d],
        "run no provider": ["run", "trust", "-m", "gpt-nonexistent-zz", *d],
        "run missing key": ["run", "trust", "-m", "anthropic/claude-sonnet-4-5", *d],
        "run scripted other game": ["run", "trust", "-m", "scripted/chess", *d],
        "run fault other game": ["run", "trust", "-m", "fault/snake", *d],
        "run unknown local": ["run", "trust", "-m", "local/gpt-5", *d],
        "run bad trained": ["run", "trust", "-m", "trained/x", *d],
        "resume unknown": ["resume", "nosuch", *d],
        "resume finished": ["resume", run_id, *d],
        "resume other api base": ["resume", run_id, "--api-base", "http://elsewhere/v1", *d],
        "report unknown": ["report", "nosuch", *d],
        "export unknown": ["export", "nosuch", *d],
        "export onto db": ["export", run_id, "-o", str(db), *d],
        "export onto wal": ["export", run_id, "-o", f"{db}-wal", *d],
        "export onto shm": ["export", run_id, "-o", f"{db}-shm", *d],
        "export into missing dir": ["export", run_id, "-o", str(work / "no" / "x.jsonl"), *d],
        "export onto a dir": ["export", run_id, "-o", str(work), *d],
        "runs limit 0": ["runs", "--limit", "0", *d],
        "runs limit huge": ["runs", "--limit", "100000000000000000000000", *d],
        "runs limit float": ["runs", "--limit", "1e23", *d],
        "play unknown game": ["play", "go"],
        "play bad mode": ["play", "trust", "--mode", "hard"],
        "play negative delay": ["play", "trust", "--delay", "-1"],
        "play eval seed in explore": ["play", "trust", "--seed", "1000005"],
        "play explore seed in eval": ["play", "trust", "--mode", "eval", "--seed", "5"],
        "play negative seed": ["play", "trust", "--seed", "-3"],
        "rm unknown": ["rm", "nosuch", "--yes", *d],
        "rm without yes": ["rm", run_id, *d],
        "tui on a directory": ["tui", "--db", str(work)],
        "tui on garbage": ["tui", "--db", str(_garbage(work))],
    }
    tally = Tally()
    for label, args in cases.items():
        _check(tally, label, args, db)
    return tally


def bad_databases(work: Path) -> Tally:
    from s3gym_tui.store import SCHEMA_VERSION

    good = work / "good.db"
    run_id = _seed_db(good)
    variants: dict[str, Path] = {}

    def variant(name: str, data: bytes) -> Path:
        path = work / f"{name}.db"
        path.write_bytes(data)
        variants[name] = path
        return path

    raw = good.read_bytes()
    variant("garbage", os.urandom(16384))
    variant("text", b"not a database\n" * 500)
    variant("truncated", raw[: len(raw) // 3])
    variant("header-only", raw[:100])
    page = int.from_bytes(raw[16:18], "big")
    damaged = bytearray(raw)
    damaged[page + 10: 3 * page] = os.urandom(2 * page - 10)
    variant("damaged-pages", bytes(damaged))
    newer = variant("newer-schema", raw)
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 9),))
    conn.commit()
    conn.close()
    foreign = work / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE things (x)")
    conn.commit()
    conn.close()
    variants["foreign"] = foreign
    for table, column, value in (("runs", "config", "{oops"), ("episodes", "history_episode_ids", "oops"),
                                 ("summaries", "source_episode_ids", "[1,"), ("checkpoints", "scores", "x"),
                                 ("runs", "status", "exploded"), ("episodes", "seed", "not a number")):
        path = variant(f"bad-{table}-{column}", raw)
        conn = sqlite3.connect(path)
        conn.execute(f"UPDATE {table} SET {column} = ?", (value,))
        conn.commit()
        conn.close()
    tally = Tally()
    for name, path in variants.items():
        for args in (["runs"], ["report", run_id], ["export", run_id, "-o", str(work / "out.jsonl")],
                     ["audit"], ["resume", run_id]):
            # a damaged row in a table the command never reads may let it succeed; a damaged file never
            _check(tally, f"{name}: {args[0]}", [*args, "--db", str(path)], path,
                   may_succeed=name.startswith("bad-"))
    for label, db in (("directory", str(work)), ("NUL in path", "/tmp/a\x00b.db")):
        _check(tally, label, ["runs", "--db", db], None)
    return tally


SERVER_MODES = {
    "429 Retry-After nan": dict(times=2, status=429, headers={"Retry-After": "nan"}),
    "429 Retry-After inf": dict(times=2, status=429, headers={"Retry-After": "inf"}),
    "429 Retry-After -1": dict(times=2, status=429, headers={"Retry-After": "-1"}),
    "429 Retry-After 1e308": dict(times=2, status=429, headers={"Retry-After": "1e308"}),
    "429 Retry-After date": dict(times=2, status=429, headers={"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"}),
    "429 forever": dict(status=429),
    "500 once": dict(times=1, status=500),
    "503 forever": dict(status=503),
    "401 bad key": dict(status=401),
    "hang": dict(hang=True),
    "slow (past the timeout)": dict(delay_s=3.0),
    "invalid JSON body": dict(raw_body="{not json"),
    "empty choices": dict(raw_body=json.dumps({"id": "x", "object": "chat.completion", "created": 0,
                                               "model": "fake", "choices": []})),
    "null content": dict(raw_body=json.dumps({"id": "x", "object": "chat.completion", "created": 0,
                                              "model": "fake", "choices": [{"index": 0, "message": {
                                                  "role": "assistant", "content": None}}]})),
    "prompt_tokens 10**30": dict(usage={"prompt_tokens": 10**30, "completion_tokens": 5}),
    "negative usage": dict(usage={"prompt_tokens": -100, "completion_tokens": -1}),
    "huge reply (5 MB)": dict(reply="x" * 5_000_000 + "\nAnswer: C, Score: 1"),
    "huge action (1 MB)": dict(reply="Answer: " + "C" * 1_000_000 + ", Score: 1"),
    "echoes the key": dict(reply=f"key={KEY}\nAnswer: C, Score: 1"),
    "prose only": dict(reply="I think cooperation is good in general."),
    "score 1e99": dict(reply="Answer: C, Score: 1e99"),
}


def server_faults(work: Path) -> Tally:
    from s3gym_tui.store import Store
    from tests.fake_openai import FakeOpenAI

    previous = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = KEY
    try:
        return _server_faults(work)
    finally:
        if previous is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = previous


def _explanation(err: str) -> list[str]:
    """The lines of stderr that explain; a run stopped while working (exit 3) adds one more line,
    `resume with: s3gym resume <id>`, which is the way on, not a second explanation."""
    lines = [line for line in err.strip().splitlines() if line.strip()]
    return [line for line in lines if not line.startswith("resume with: s3gym resume ")]


def _server_faults(work: Path) -> Tally:
    from s3gym_tui.store import Store
    from tests.fake_openai import FakeOpenAI

    tally = Tally()
    for label, spec in SERVER_MODES.items():
        server = FakeOpenAI().start()
        db = work / f"server-{len(tally.problems)}-{tally.cases}.db"
        try:
            server.behave(**spec)
            started = time.monotonic()
            code, _, err = _cli(["run", "trust", "-m", "openai/fake", "--api-base", server.base_url,
                                 "--episodes", "1", "--eval-episodes", "0", "--timeout", "1",
                                 "--max-retries", "2", "--db", str(db)])
            elapsed = time.monotonic() - started
        finally:
            server.stop()
        tally.cases += 1
        lines = _explanation(err)
        with Store(db) as store:
            runs = store.runs.list_runs()
            run = runs[0] if runs else None
        ended = run is not None and (run.status == "finished" or (run.status == "stopped"
                                                                 and run.status_reason))
        if ended and "Traceback" not in err and (code == 0 or len(lines) == 1) and elapsed < 120:
            tally.one_line += 1
        else:
            tally.problems.append(f"{label}: exit {code} after {elapsed:.0f} s, run "
                                  f"{run.status if run else None}, stderr {err.strip()[-300:]!r}")
        leaked = any(KEY.encode() in Path(f"{db}{s}").read_bytes()
                     for s in ("", "-wal") if Path(f"{db}{s}").exists())
        if leaked:
            tally.problems.append(f"{label}: the key is in the database")
        else:
            tally.intact += 1
    return tally


def run_campaign(work: Path) -> dict[str, Tally]:
    return {"bad flags": bad_flags(work), "bad databases": bad_databases(work),
            "server fault modes": server_faults(work)}


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="attack-"))
    started = time.monotonic()
    results = run_campaign(work)
    if "--json" in sys.argv:
        print(json.dumps({k: {**vars(v), "ok": v.ok()} for k, v in results.items()}, indent=2))
    else:
        from benchmarks._util import print_table

        print_table(f"attack campaign ({time.monotonic() - started:.0f} s)",
                    ["campaign", "cases", "one line / ended cleanly", "data intact / no key", "problems"],
                    [[k, v.cases, v.one_line, v.intact, len(v.problems)] for k, v in results.items()])
        for name, tally in results.items():
            for problem in tally.problems[:30]:
                print(f"{name}: {problem}")
    return 0 if all(t.ok() for t in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
