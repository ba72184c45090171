"""Grammar engines for constrained sampling with transformers on this CPU (training/constrain.py): for each
game's answer line at its first state, how long each engine takes to compile the grammar, how long a
reply takes, whether every reply parses as a legal action, and how diverse the sampled actions are at
the GRPO temperature (distinct actions over N replies: the hand scan keeps only the 8 best-scored
allowed tokens at every step, so it cannot draw from the whole allowed distribution).

    nice -n 10 .venv/bin/python benchmarks/grammar_engines.py [--replies 8] [--temperature 1.0] [--games trust,snake]

Engines: llguidance (the default), xgrammar (if installed: its compiler on the same GBNF, its mask applied
by a small LogitsProcessor here), the hand-written regex scan (the fallback).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GAMES = ("trust", "snake", "tetris", "nullify", "pvz", "minesweeper", "chess")


def xgrammar_processor(tokenizer, gbnf: str, cache: dict):
    """xgrammar's matcher as a LogitsProcessor over one row (compile time returned separately)."""
    import torch
    import xgrammar as xgr
    from transformers import LogitsProcessor

    if "compiler" not in cache:
        cache["info"] = xgr.TokenizerInfo.from_huggingface(tokenizer)
        cache["compiler"] = xgr.GrammarCompiler(cache["info"])
    started = time.perf_counter()
    compiled = cache["compiler"].compile_grammar(gbnf)
    seconds = time.perf_counter() - started

    class Processor(LogitsProcessor):
        def __init__(self) -> None:
            self.matcher = xgr.GrammarMatcher(compiled)
            self.prompt_len = None
            self.bitmask = xgr.allocate_token_bitmask(1, cache["info"].vocab_size)

        def __call__(self, input_ids, scores):
            if self.prompt_len is None:
                self.prompt_len = input_ids.shape[1]
            elif input_ids.shape[1] > self.prompt_len:
                self.matcher.accept_token(int(input_ids[0, -1]))
            self.matcher.fill_next_token_bitmask(self.bitmask)
            scores = scores.clone()
            xgr.apply_token_bitmask_inplace(scores[:, :cache["info"].vocab_size], self.bitmask.to(scores.device))
            return scores

    return Processor(), seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replies", type=int, default=8)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--games", default=",".join(GAMES))
    parser.add_argument("--max-new-tokens", type=int, default=96)
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessorList

    import s3gym_games as games
    from s3gym_games.reply import parse_reply
    from s3gym_games.prompt import build_messages
    from s3gym_tui.training.backend import quiet, resolve_base
    from s3gym_tui.training.constrain import make_constraint
    from s3gym_tui.training.grammar import action_is_wellformed, answer_line

    torch.set_num_threads(2)
    base = resolve_base(None)
    tokenizer = AutoTokenizer.from_pretrained(base)
    with quiet():
        model = AutoModelForCausalLM.from_pretrained(base).eval()
    entry = {"model": model, "tokenizer": tokenizer}
    xgr_cache: dict = {}
    try:
        import xgrammar  # noqa: F401
        engines = ["llguidance", "xgrammar", "regex scan"]
    except ImportError:
        engines = ["llguidance", "regex scan"]
    print(f"bundled SmolLM2-135M, {torch.get_num_threads()} threads, temperature {args.temperature}, "
          f"{args.replies} replies per game and engine")
    print("| game | engine | compile ms | s / reply | tokens / s | parsed legal | distinct actions |")
    print("|---|---|---|---|---|---|---|")
    for name in [g for g in args.games.split(",") if g]:
        game = games.make(name, "explore")
        game.reset(3)
        rule = game.action_grammar()
        line = answer_line(rule)
        ids = tokenizer.apply_chat_template(build_messages(game, None, [], ""), add_generation_prompt=True,
                                            return_dict=False)
        prompt = torch.tensor([list(ids)])
        for engine in engines:
            legal, actions, tokens, seconds, compile_s = 0, [], 0, 0.0, None
            for k in range(args.replies):
                if engine == "xgrammar":
                    processor, compile_s = xgrammar_processor(tokenizer, line.gbnf, xgr_cache)
                else:
                    started = time.perf_counter()
                    processor, used = make_constraint(entry, line, prompt.shape[1], tokenizer.eos_token_id, engine)
                    compile_s = time.perf_counter() - started if k == 0 else compile_s
                torch.manual_seed(k)
                started = time.perf_counter()
                with torch.inference_mode():
                    out = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), do_sample=True,
                                         temperature=args.temperature, top_k=0, top_p=1.0,
                                         max_new_tokens=args.max_new_tokens, pad_token_id=tokenizer.eos_token_id,
                                         logits_processor=LogitsProcessorList([processor]))
                seconds += time.perf_counter() - started
                new = out[0, prompt.shape[1]:]
                tokens += len(new)
                parsed = parse_reply(tokenizer.decode(new, skip_special_tokens=True))
                if parsed.action is not None and action_is_wellformed(parsed.action, rule):
                    legal += 1
                actions.append(parsed.action)
            print(f"| {name} | {engine} | {1000 * (compile_s or 0):.1f} | {seconds / args.replies:.2f} | "
                  f"{tokens / seconds:.1f} | {legal}/{args.replies} | {len(set(actions))} |", flush=True)


if __name__ == "__main__":
    main()
