"""`--method taspo` on the tiny base: the GRPO loss receives per-token advantages equal to A_i * w_it (read at
TRL's loss, matched to the rollouts by their completion ids); `s3gym train --method taspo` end to end in a
subprocess: rollouts, their training PI and credit in the store, the held-out audit clean."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from s3gym_tui.cli import main
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, audit

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[2]


def always(model, messages, ctx):
    """An analyzer stand-in: one rule without cues (it aligns with every turn), citing T1's first step."""
    return "ITEM: keep the answer line short | WHEN: always | CUES: none | EVIDENCE: T1#0"


def test_the_loss_receives_a_times_w(tiny_base, tmp_path):
    import torch

    from s3gym_tui.training import grpo
    from s3gym_tui.training.config import TaspoConfig
    from s3gym_tui.training.taspo import taspo_trainer

    config = TaspoConfig(reward="oracle", updates=1, num_generations=2, states_per_update=1, save_every=1,
                         max_completion_length=10, rollout_step_cap=3, level="episode", learning_rate=1e-2,
                         format_weight=5.0, credit="action", kappa=0.0, tau=0.01, eps_w=0.5, warm_start=0)
    hooked, losses = [], []
    base = taspo_trainer(config, analyzer="test", analyze=always)

    class Recording(base):
        def token_advantages(self, advantages, loss_mask, rollouts):
            out = super().token_advantages(advantages, loss_mask, rollouts)
            hooked.append((advantages.clone(), list(rollouts), [list(w) for w in self.taspo.last_weights]))
            return out

        def _compute_loss(self, model, inputs):  # TRL's loss: what it is given (test only)
            losses.append({k: inputs[k].clone() for k in ("completion_ids", "completion_mask", "advantages")})
            return super()._compute_loss(model, inputs)

    grpo.train_grpo("trust", [11, 12], tiny_base, tmp_path / "out", config, trainer_class=Recording)
    (A, rollouts, weights), = hooked
    assert float(A.abs().sum()) > 0  # the group had a success and a failure
    moved = [w for w in weights if any(abs(x - 1) > 1e-3 for x in w)]
    assert moved  # PI moved credit between some trajectory's actions
    rows = {tuple(r.completion_ids): n for n, r in enumerate(rollouts)}
    seen = 0
    for batch in losses:
        for ids, mask, adv in zip(batch["completion_ids"], batch["completion_mask"], batch["advantages"]):
            length = int(mask.sum()) if mask.sum() else 0
            key = next((k for k in rows if list(k) == ids.tolist()[:len(k)]), None)
            assert key is not None, "a loss row that is no rollout"
            n = rows[key]
            turns = rollouts[n].turns(adv.shape[0])
            expected = [float(A[n]) * (weights[n][t] if t >= 0 else 1.0) for t in turns]
            got = adv.tolist()
            for p, (t, m) in enumerate(zip(turns, mask.tolist())):
                if m and t >= 0:  # the policy's tokens: exactly A_i * w_it
                    assert got[p] == pytest.approx(expected[p], rel=1e-5, abs=1e-6)
            seen += 1
            assert length > 0
    assert seen == len(rollouts)
    assert torch.is_tensor(A)


def test_s3gym_train_method_taspo_end_to_end(tiny_base, tmp_path, capsys):
    import asyncio

    from s3gym_tui.engine.credit import episode_credit
    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.training.rollout_store import rollout_run_id

    db = tmp_path / "t.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=2,
                                              eval_every=2, eval_episodes=1))
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(ROOT),
               S3GYM_TRAINING_DIR=str(tmp_path / "training"))
    args = ["--method", "taspo", "--reward", "oracle", "--updates", "1", "--generations", "2",
            "--states-per-update", "1", "--save-every", "1", "--rollout-step-cap", "2", "--completion-tokens", "8",
            "--eval-episodes", "1", "--step-cap", "1", "--progress", "plain", "--kappa", "0", "--credit", "action"]
    proc = subprocess.run([sys.executable, "-m", "s3gym_tui", "train", run.id, "--base", str(tiny_base), *args,
                           "--db", str(db)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with Store(db) as store:
        (training,) = store.trainings.list(source_run=run.id)
        assert training.method == "taspo" and training.status == "finished"
        g = training.settings["recipe"]
        assert (g["level"], g["credit"], g["kappa"], g["pi_source"]) == ("episode", "action", 0.0, "siblings")
        episodes = store.episodes.list(rollout_run_id(training.id))
        assert len(episodes) == 2
        credits = [episode_credit(store, e.id) for e in episodes]
        assert all(c is not None and c.credit == "action" for c in credits)
        assert {c.group for c in credits} == {tuple(e.id for e in episodes)}
        rows = store.conn.execute("SELECT DISTINCT training_id FROM episode_credits").fetchall()
        assert rows == [(training.id,)]
        for c in credits:
            if c.extraction_id:  # a group with a success: PI by the run's model (the scripted analyzer)
                ext = store.credit.pi_extraction(c.extraction_id)
                assert ext["purpose"] == "training" and ext["analyzer"] == "scripted/trust"
        assert audit(store).ok
    # refused by the same command line in this process (the training above needed a process of its own)
    assert main(["train", run.id, "--method", "taspo", "--level", "step", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "episode-level" in err and len(err.strip().splitlines()) == 1, err
