"""TRL's GRPOTrainer with one overridable advantage hook, `token_advantages` (needs torch and TRL).

GRPO's advantage of completion i is A_i = (r_i - mean of its group) / std of its group (TRL computes
it). `S3GymGRPOTrainer.token_advantages(advantages, loss_mask, rollouts)` receives those A_i
(shape [B], B = the local generation batch: groups of G completions in a row), the loss mask
([B, T]: 1 on the policy's tokens, 0 on padding and on the game's text of an episode) and the
batch's rollouts (group_rollouts.Rollout, aligned with the rows: steps, actions, rewards,
`turns(T)` = which step each token belongs to), and returns per-token advantages [B, T]. The
default broadcasts A_i over the trajectory's policy tokens. A subclass (e.g. TASPO's per-action
weights) overrides this one method and passes its class as `train_grpo(..., trainer_class=...)`.

TRL's loss accepts advantages of shape [B, T] (GRPOTrainer._compute_loss: "to support subclasses
that provide advantages with shape (B, T)"). The advantages are made in TRL's private
`_generate_and_score_completions`, so that is where the hook is applied (after it returns, before
the batch is shuffled and split): tests/training/test_grpo_levels.py fails if it moves (a custom
hook must change the loss).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch
from trl import GRPOTrainer


class S3GymGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages go through `token_advantages` (see the module docstring)."""

    group_rollouts: Optional[Any] = None  # group_rollouts.GroupRollouts (its `last`: the batch's rollouts)

    def token_advantages(self, advantages: torch.Tensor, loss_mask: torch.Tensor,
                         rollouts: Sequence[Any]) -> torch.Tensor:
        """Per-token advantages [B, T] from the completions' A_i [B] (default: A_i on every token;
        tokens outside `loss_mask` are ignored by the loss whatever they hold)."""
        return advantages.unsqueeze(1).expand(-1, loss_mask.shape[1]).clone()

    def _generate_and_score_completions(self, inputs):  # TRL private: see the module docstring
        output = super()._generate_and_score_completions(inputs)
        mask = output["completion_mask"]
        if "tool_mask" in output:
            mask = mask * output["tool_mask"]
        rollouts = list(self.group_rollouts.last) if self.group_rollouts is not None else [None] * mask.shape[0]
        advantages = self.token_advantages(output["advantages"], mask, rollouts)
        if tuple(advantages.shape) != tuple(mask.shape):
            raise ValueError(f"token_advantages returned shape {tuple(advantages.shape)}, expected "
                             f"{tuple(mask.shape)} (completions x tokens)")
        output["advantages"] = advantages.to(mask.device)
        return output
