"""Whether a training could learn: the learning signal of each GRPO and on-policy distillation update,
from the figures TRL logs (read by the public TrainerCallback.on_log in hf.Reporter) and stored with
every loss point (training_losses.metrics), so the CLI, the Training screen and `s3gym trainings
--json` read the same facts.

- GRPO: `source_zero_std_share` (ours: the share of groups, the G replies sampled at one state, whose
  rewards from the reward source itself, the format term left out, are all equal) and
  `frac_reward_zero_std` (TRL's, on the whole reward: a group told apart only by the format term counts
  as having variance there, not here). Advantages are rewards minus the group mean, so a group without reward
  variance contributes nothing; an update where every group is such has no signal (with beta = 0, no
  KL term either, its gradient is 0). Shown next to it: reward std, grad norm, the share of
  replies that parsed (our reward function's `parsed_replies`) and, when part of each group was
  sampled free (sampling.py), the share of those free replies that parsed (`parsed_free_replies`:
  whether the policy itself learns the answer line).
- On-policy distillation: TRL's loss is the generalised JSD between student and teacher, at beta = 1
  the reverse KL (stored as `kl`). KL 0 means the student already is the teacher: nothing to learn.

Torch-free (the CLI and the app import it without the train extra).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from s3gym_tui.store import LossPoint

ZERO = 1e-12
NO_SIGNAL_KEY = "no_signal"  # 1.0 on an update without signal, 0.0 otherwise (stored with the loss point)
# what each update's signal is read from, in the order shown
SIGNAL_KEYS = ("source_zero_std_share", "frac_reward_zero_std", "reward_std", "source_reward_std", "parsed_replies",
               "parsed_free_replies", "grad_norm", "kl")
SIGNAL_LABELS = {"source_zero_std_share": "groups the reward source did not tell apart",
                 "source_reward_std": "reward source std",
                 "frac_reward_zero_std": "zero-variance groups", "reward_std": "reward std",
                 "parsed_replies": "parsed replies",
                 "parsed_free_replies": "parsed free replies", "grad_norm": "grad norm", "kl": "KL"}
WATCHED_PHASES = ("grpo", "distill-on")
# phases that train a watched phase's starting point inside the same training, named for the verdict
PRIOR_PHASES = {"warm-start": "format warm-started"}


def signal_metrics(phase: str, logs: Mapping[str, object]) -> dict[str, float]:
    """The signal figures of one logged update (numbers only; `kl` from the loss for distillation)."""
    found = {k: float(v) for k, v in logs.items() if k in SIGNAL_KEYS and isinstance(v, (int, float))
             and not isinstance(v, bool)}
    if phase == "distill-on" and "kl" not in found and isinstance(logs.get("loss"), (int, float)):
        found["kl"] = float(logs["loss"])  # TRL's JSD at beta = 1: the reverse KL
    return found


def no_signal_reason(phase: str, metrics: Mapping[str, float]) -> Optional[str]:
    """Why an update could not learn anything, or None (also None when the figures are missing)."""
    if phase == "grpo":
        source = metrics.get("source_zero_std_share")
        if source is not None and source >= 1.0 - ZERO:  # the format term's spread is not a reward signal
            return ("the reward source gave every group's replies one reward (its own spread 0: any spread was "
                    "the format term's)")
        share = metrics.get("frac_reward_zero_std")
        if share is not None and share >= 1.0 - ZERO:
            return "every group had zero reward variance (no advantage to learn from)"
        if share is None and metrics.get("reward_std") is not None and abs(metrics["reward_std"]) <= ZERO:
            return "reward std 0 (no advantage to learn from)"
        return None
    if phase == "distill-on":
        kl = metrics.get("kl")
        if kl is not None and abs(kl) <= ZERO:
            return "KL 0: the student already matches its teacher"
    return None


@dataclass(frozen=True)
class SignalSummary:
    phase: str
    updates: int  # logged updates of the phase
    no_signal: int  # of which without signal
    zero_variance_share: Optional[float] = None  # mean share of zero-variance groups (GRPO)
    parsed_share: Optional[float] = None  # mean share of parsed replies (GRPO)
    reward_std: Optional[float] = None  # mean reward std (GRPO)
    grad_norm: Optional[float] = None  # mean grad norm
    kl: Optional[float] = None  # mean KL (distillation)
    free_parsed_share: Optional[float] = None  # mean share of parsed replies among the free-sampled ones
    # a phase of the same training that trained before these updates (GRPO's format warm start): the
    # adapter then starts from that model, not from the base
    prior: Optional[str] = None

    @property
    def line(self) -> str:
        return f"{self.no_signal} of {self.updates} {self.phase} updates had no signal"

    @property
    def none_learnt(self) -> bool:
        """Every update was without signal: the adapter is what it started from (LoRA starts at zero: the
        base model, unless a prior phase trained it)."""
        return self.updates > 0 and self.no_signal == self.updates

    @property
    def verdict(self) -> Optional[str]:
        """What a training none of whose updates had a signal is, in words; None when some update had one."""
        if not self.none_learnt:
            return None
        if self.prior:
            return f"its {self.phase} updates learnt nothing, its checkpoints are the {self.prior} model"
        return "nothing was learnt, its checkpoints are the base model"

    def as_dict(self) -> dict:
        return {"phase": self.phase, "updates": self.updates, "no_signal": self.no_signal,
                "zero_variance_share": self.zero_variance_share, "parsed_share": self.parsed_share,
                "reward_std": self.reward_std, "grad_norm": self.grad_norm, "kl": self.kl,
                "free_parsed_share": self.free_parsed_share, "prior": self.prior}


def _mean(values: list[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def point_without_signal(point: LossPoint) -> Optional[str]:
    """The stored verdict of a loss point, else the one derived from its figures (older points)."""
    if point.phase not in WATCHED_PHASES:
        return None
    return no_signal_reason(point.phase, point.metrics)


def signal_summaries(points: Iterable[LossPoint]) -> list[SignalSummary]:
    """One summary per watched phase (GRPO, on-policy distillation) among the training's loss points."""
    by_phase: dict[str, list[LossPoint]] = {}
    prior: Optional[str] = None
    for p in points:
        if p.phase in WATCHED_PHASES:
            by_phase.setdefault(p.phase, []).append(p)
        elif p.phase in PRIOR_PHASES:
            prior = PRIOR_PHASES[p.phase]
    out = []
    for phase, pts in by_phase.items():
        def values(key: str) -> list[float]:
            return [float(p.metrics[key]) for p in pts if isinstance(p.metrics.get(key), (int, float))]

        out.append(SignalSummary(
            phase, len(pts), sum(1 for p in pts if point_without_signal(p) is not None),
            _mean(values("frac_reward_zero_std")), _mean(values("parsed_replies")), _mean(values("reward_std")),
            _mean(values("grad_norm")),
            _mean(values("kl") or ([float(p.loss) for p in pts] if phase == "distill-on" else [])),
            _mean(values("parsed_free_replies")), prior))
    return out


def learnt_nothing(points: Iterable[LossPoint]) -> Optional[SignalSummary]:
    """The summary of a training none of whose watched updates had a signal (its adapter equals the
    base model), or None (it learnt, a prior phase such as the format warm start trained it, or it has
    no GRPO / on-policy update at all: SFT always has one)."""
    summaries = signal_summaries(points)
    if summaries and all(s.none_learnt and not s.prior for s in summaries):
        return summaries[0]
    return None
