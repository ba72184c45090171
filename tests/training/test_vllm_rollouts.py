"""GRPO rollouts through TRL's own vLLM generation (`--vllm`), without vLLM: a stand-in with the
interface of TRL's VLLMGeneration (the attributes TRL reads at each generate, and generate's signature
and return) records what it is asked and answers with known replies and logprobs. Proven here: the
rollouts ask it with the right prompts, n, temperature, max tokens and regex (constrained half) or
none (free half), its replies and logprobs become the rollouts' completion ids / logprobs, a whole
GRPO update runs through TRL with it patched in, and without vLLM the transformers sampler is used.
What is NOT exercised: a real vLLM engine or server (none here), its structured-outputs backend
accepting our regex, and its logprobs' values."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

import s3gym_games as games
from s3gym_games.reply import parse_reply
from s3gym_games.prompt import build_messages

pytest.importorskip("trl")

CONSTRAINED_TEXT = "Answer: cheat, Score: 3"
FREE_TEXT = "Let me think.\nAnswer: collaborate, Score: 7\nAnd then some more prose after the line"


class FakeGeneration:
    """TRL's VLLMGeneration as our rollouts use it: the per-call fields and generate()."""

    def __init__(self, processing_class=None, temperature=0.5, max_completion_length=99, mode="colocate",
                 structured_outputs_regex="ORIGINAL", **kwargs):
        self.tokenizer = processing_class
        self.temperature, self.max_completion_length = temperature, max_completion_length
        self.structured_outputs_regex, self.mode, self.init_kwargs = structured_outputs_regex, mode, kwargs
        self.calls: list[dict] = []
        self.syncs = 0

    def sync_weights(self):
        self.syncs += 1

    def generate(self, prompts, images, num_generations, profiler=None):
        self.calls.append({"prompts": [list(p) for p in prompts], "images": images, "n": num_generations,
                           "regex": self.structured_outputs_regex, "temperature": self.temperature,
                           "max_tokens": self.max_completion_length})
        tok = self.tokenizer
        if self.structured_outputs_regex is not None:
            reply = tok(CONSTRAINED_TEXT, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        else:
            reply = tok(FREE_TEXT, add_special_tokens=False)["input_ids"]
        reply = reply[:self.max_completion_length]
        base = len(self.calls) * 1000
        completions = [list(reply) for _ in prompts]
        # distinct logprobs per call and position, each a top-1 list as vLLM's extract_logprobs gives
        logprobs = [[[-(base + j) / 1000.0] for j in range(len(reply))] for _ in prompts]
        return [list(p) for p in prompts], completions, logprobs, [[[t] for t in reply] for _ in prompts]


def _sampler(tiny_base, temperature=0.9, max_new_tokens=40):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from s3gym_tui.training.sampling import ReplySampler

    return ReplySampler(AutoModelForCausalLM.from_pretrained(tiny_base), AutoTokenizer.from_pretrained(tiny_base),
                        temperature, max_new_tokens, seed=1)


def _state(seed: int, game_name: str = "trust", actions=()) -> list:
    """A step-level prompt as TRL hands it over: the engine's messages, the state's grammar on the first."""
    from s3gym_games.trl_env import GRAMMAR_KEY

    game = games.make(game_name, "explore")
    game.reset(seed)
    for action in actions:
        game.step(action)
    messages = build_messages(game, None, [], "")
    return [{**messages[0], GRAMMAR_KEY: game.action_grammar()}] + [{**m, GRAMMAR_KEY: None} for m in messages[1:]]


def _trainer(generation, mode="colocate", use_vllm=True):
    return SimpleNamespace(use_vllm=use_vllm, vllm_mode=mode, vllm_generation=generation)


def test_step_level_replies_are_asked_of_vllm_with_the_regex_for_the_constrained_half(tiny_base):
    from s3gym_tui.training.grammar import answer_line_pattern
    from s3gym_tui.training.group_rollouts import GroupRollouts

    sampler = _sampler(tiny_base)
    tok = sampler.tokenizer
    rollouts = GroupRollouts("trust", "step", sampler, 4, "mixed", "oracle")
    fake = FakeGeneration(tok)
    prompts = [_state(3)] * 4 + [_state(4)] * 4
    out = rollouts(prompts, _trainer(fake))
    ids = [sampler.prompt_ids(p) for p in prompts]
    pattern = answer_line_pattern(games.make("trust", "explore").action_grammar())
    assert [c["regex"] for c in fake.calls] == [pattern, None]  # one call per kind, constrained first
    assert fake.calls[0]["prompts"] == [ids[i] for i in (0, 1, 4, 5)]  # the first ceil(G/2) of each group
    assert fake.calls[1]["prompts"] == [ids[i] for i in (2, 3, 6, 7)]
    assert all(c["n"] == 1 and c["images"] is None and c["temperature"] == 0.9 and c["max_tokens"] == 40
               for c in fake.calls)
    # the call's fields were put back as they were
    assert (fake.structured_outputs_regex, fake.temperature, fake.max_completion_length) == ("ORIGINAL", 0.5, 99)
    assert sampler.drawn == 0  # the transformers sampler generated nothing
    assert out["prompt_ids"] == ids
    assert out["s3gym_constrained"] == [True, True, False, False] * 2
    constrained = tok(CONSTRAINED_TEXT, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    for i in (0, 1, 4, 5):
        assert out["completion_ids"][i] == constrained
        assert out["logprobs"][i] == [-(1000 + j) / 1000.0 for j in range(len(constrained))]
    for i in (2, 3, 6, 7):  # free: cut after the answer line, its logprobs with it
        reply = out["completion_ids"][i]
        text = tok.decode(reply, skip_special_tokens=True)
        assert text.startswith("Let me think.") and text.rstrip().endswith("Score: 7") and "prose" not in text
        assert parse_reply(text).action == "collaborate"
        assert out["logprobs"][i] == [-(2000 + j) / 1000.0 for j in range(len(reply))]
    assert [parse_reply(sampler.text(r.completion_ids)).action for r in rollouts.last] == (
        ["cheat", "cheat", "collaborate", "collaborate"] * 2)


def test_without_vllm_the_transformers_sampler_generates_and_no_logprobs_are_returned(tiny_base):
    from s3gym_tui.training.group_rollouts import GroupRollouts

    sampler = _sampler(tiny_base, max_new_tokens=24)
    rollouts = GroupRollouts("trust", "step", sampler, 2, "mixed", "oracle")
    fake = FakeGeneration(sampler.tokenizer)
    for trainer in (None, _trainer(fake, use_vllm=False)):
        before = sampler.drawn
        out = rollouts([_state(3)] * 2, trainer)
        assert sampler.drawn == before + 2 and out["logprobs"] is None
        assert parse_reply(sampler.text(out["completion_ids"][0])).action in ("collaborate", "cheat")
    assert fake.calls == []


def test_server_mode_joins_every_collective_call_and_colocate_skips_an_empty_one(tiny_base):
    """A rank whose share of the batch holds only constrained slots still joins the free call in server
    mode (TRL gathers every rank's prompts there); in colocate mode it does not call for nothing."""
    from s3gym_tui.training.group_rollouts import GroupRollouts

    sampler = _sampler(tiny_base)
    for mode, calls in (("server", [1, 0]), ("colocate", [1])):
        fake = FakeGeneration(sampler.tokenizer)
        rollouts = GroupRollouts("trust", "step", sampler, 2, "mixed", "oracle")
        out = rollouts([_state(3)], _trainer(fake, mode))
        assert [len(c["prompts"]) for c in fake.calls] == calls, mode
        assert out["s3gym_constrained"] == [True] and len(out["logprobs"][0]) == len(out["completion_ids"][0])
    fake = FakeGeneration(sampler.tokenizer)
    GroupRollouts("trust", "step", sampler, 2, "free", "oracle")([_state(3)] * 2, _trainer(fake, "server"))
    assert [c["regex"] for c in fake.calls] == [None]  # a kind the sampling never uses is never asked for


def test_episode_level_turns_go_through_vllm_and_the_games_text_carries_zero_logprobs(tiny_base):
    from s3gym_tui.training.group_rollouts import GroupRollouts, episode_prompt

    sampler = _sampler(tiny_base)
    fake = FakeGeneration(sampler.tokenizer)
    played = []
    rollouts = GroupRollouts("trust", "episode", sampler, 2, "mixed", "oracle", step_cap=2, on_episode=played.append)
    out = rollouts([episode_prompt("trust", 7)] * 2, _trainer(fake))
    assert sampler.calls == 0 and len(fake.calls) == 4  # 2 episodes x 2 turns, one reply per call
    assert all(len(c["prompts"]) == 1 and c["n"] == 1 for c in fake.calls)
    assert [c["regex"] is not None for c in fake.calls] == [True, True, False, False]
    for r, logprobs, mask in zip(played, out["logprobs"], out["env_mask"]):
        assert len(logprobs) == len(r.completion_ids) == len(mask)
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if m == 0) and 0 in mask
        # each turn was sampled from the engine's own prompt for that turn
        assert [c["prompts"][0] for c in fake.calls if (c["regex"] is not None) == r.constrained] == [
            sampler.prompt_ids(s.prompt) for s in r.steps]
        assert [s.action for s in r.steps] == (["cheat"] * 2 if r.constrained else ["collaborate"] * 2)
        assert r.unparsed == 0
    first = [lp for lp, turn in zip(out["logprobs"][0], played[0].turn_of_token) if turn == 0]
    assert first == [-(1000 + j) / 1000.0 for j in range(len(first))]


def test_a_grpo_update_runs_through_trl_with_its_vllm_generation_replaced(tiny_base, tmp_path, monkeypatch):
    """TRL builds its VLLMGeneration (here the stand-in), syncs weights, calls our rollouts, and the
    importance-sampling correction reads our logprobs: the update completes and saves an adapter."""
    import trl.trainer.grpo_trainer as grpo_trainer_module

    from s3gym_tui.training import grpo
    from s3gym_tui.training.config import GrpoConfig

    made: list[FakeGeneration] = []

    def build(**kwargs):
        made.append(FakeGeneration(**kwargs))
        return made[-1]

    monkeypatch.setattr(grpo_trainer_module, "VLLMGeneration", build)
    result = grpo.train_grpo("trust", [11, 12], tiny_base, tmp_path / "out",
                             GrpoConfig(reward="oracle", updates=1, num_generations=2, states_per_update=1,
                                        save_every=1, max_completion_length=24, temperature=0.8, rollout_step_cap=2,
                                        vllm="colocate", warm_start=0))
    (fake,) = made
    assert fake.mode == "colocate" and fake.syncs >= 1
    assert {c["regex"] is None for c in fake.calls} == {True, False}
    assert all(c["temperature"] == 0.8 and c["max_tokens"] == 24 and c["n"] == 1 for c in fake.calls)
    assert result.steps == 1 and sorted(result.adapters) == [1]


def test_the_trl_surface_the_vllm_rollouts_rely_on_is_still_there():
    """Fails when TRL moves what vllm_sampling.py uses: the trainer's `vllm_generation`, the fields
    TRL's generate reads at every call, generate's signature, and rollout_func called as (prompts, trainer)."""
    from trl.generation.vllm_generation import VLLMGeneration
    from trl.trainer import grpo_trainer

    from s3gym_tui.training.vllm_sampling import CALL_FIELDS

    assert list(inspect.signature(VLLMGeneration.generate).parameters)[:4] == [
        "self", "prompts", "images", "num_generations"]
    source = inspect.getsource(VLLMGeneration.generate)
    for name in CALL_FIELDS:
        assert f"self.{name}" in source, name
    trainer = inspect.getsource(grpo_trainer.GRPOTrainer)
    assert "self.vllm_generation = VLLMGeneration(" in trainer
    assert "self.rollout_func(prompts, self)" in trainer


def test_episode_level_through_a_server_is_refused_across_processes():
    from s3gym_tui.training.options import vllm_problem

    assert "trains in one process" in vllm_problem("server", "episode", 2)
    assert "trains in one process" not in (vllm_problem("colocate", "episode", 2) or "")
    assert "trains in one process" not in (vllm_problem("server", "episode", 1) or "")
    assert "each state has its own grammar" in vllm_problem("server", "step", 2)
    assert "trains in one process" not in (vllm_problem("server", "step", 1) or "")
    assert "trains in one process" not in (vllm_problem("colocate", "step", 2) or "")


def test_constrained_replies_of_different_states_are_asked_for_under_each_states_grammar(tiny_base):
    from s3gym_games.trl_env import GRAMMAR_KEY
    from s3gym_tui.training.grammar import answer_line_pattern
    from s3gym_tui.training.group_rollouts import GroupRollouts

    sampler = _sampler(tiny_base)
    fake = FakeGeneration(sampler.tokenizer)
    first, second = _state(3, "chess"), _state(4, "chess")
    assert first[0][GRAMMAR_KEY] != second[0][GRAMMAR_KEY]  # chess's cells differ by state
    GroupRollouts("chess", "step", sampler, 2, "constrained", "oracle")([first] * 2 + [second] * 2, _trainer(fake))
    assert [c["regex"] for c in fake.calls] == [answer_line_pattern(first[0][GRAMMAR_KEY]),
                                                answer_line_pattern(second[0][GRAMMAR_KEY])]
    assert [len(c["prompts"]) for c in fake.calls] == [2, 2]
