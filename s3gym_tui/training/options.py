"""What a training is asked to do (torch-free, so the CLI can build it without the train extra):
SFT and GRPO experts from one run, and the two-phase distillation of several experts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from s3gym_tui.training.backend import TrainConfig

METHODS: tuple[str, ...] = ("sft", "grpo", "taspo")  # taspo: episode-level GRPO with credit per action
REWARDS: tuple[str, ...] = ("self", "stated", "oracle")
LEVELS: tuple[str, ...] = ("step", "episode")
SAMPLINGS: tuple[str, ...] = ("mixed", "constrained", "free")  # sampling.py (torch-free copy for the CLI)


@dataclass(frozen=True)
class GrpoConfig:
    """GRPO on the game's states: each update samples `num_generations` replies at each of
    `states_per_update` states the current policy reaches on the run's exploration seeds."""

    reward: str = "self"  # self: the agent's own (frozen) judgement of each step; stated; oracle (ablation)
    updates: int = 8  # optimizer steps
    num_generations: int = 4  # G: replies compared per state
    states_per_update: int = 2
    max_completion_length: int = 32  # tokens per sampled reply (the answer line is short)
    temperature: float = 1.0
    learning_rate: float = 1e-4
    beta: float = 0.0  # KL to the base (TRL's default: none)
    save_every: int = 4  # an adapter (checkpoint x = 1, 2, ...) every N updates, and at the end
    episodes: Optional[int] = None  # exploration seeds rolled out on (default: the run's exploration episodes)
    rollout_step_cap: Optional[int] = None  # steps per rollout episode (default: the game's cap)
    judge_max_new_tokens: int = 8
    # step: a group is G replies at one state; episode: G whole episodes on one exploration seed
    level: str = "step"
    # how rollout replies are sampled (sampling.py): mixed (half of each group under the answer-line
    # grammar, half free), constrained, free; `format_weight` is taken off per reply without an action
    sampling: str = "mixed"
    format_weight: float = 1.0
    # a format warm start before the first update (warm_start.py): SFT on this many of the base's own
    # grammar-constrained replies at states it reaches on the exploration seeds (0: none), for
    # `warm_start_epochs` passes at `learning_rate`; no reward is read
    warm_start: int = 0
    warm_start_epochs: int = 2
    vllm: Optional[str] = None  # None: transformers generates; server | colocate: TRL's vLLM modes
    vllm_url: Optional[str] = None  # server mode: the `trl vllm-serve` server (default: TRL's localhost:8000)
    # TASPO (training/taspo.py; method taspo, episode level): per-token advantages A_i * w_it. credit:
    # action | token | uniform (None: plain GRPO); pi_source: siblings | off-trajectory (the ablation);
    # analyzer: the model that writes PI (None: the source run's model)
    credit: Optional[str] = None
    kappa: float = 0.05
    tau: float = 1.0
    eps_w: float = 0.5
    pi_source: str = "siblings"
    analyzer: Optional[str] = None

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


VLLM_MODES: tuple[str, ...] = ("server", "colocate")


def vllm_problem(mode: Optional[str], level: str = "step", processes: int = 1) -> Optional[str]:
    """Why `--vllm MODE` cannot be used here (one line), or None. Checked before anything is stored.
    A server across processes is refused: TRL's server-mode generate is a collective call under one
    set of sampling settings, while each rank's episodes take a different number of turns (episode
    level) and each state has its own answer-line grammar (both levels; vllm_sampling.py)."""
    if mode is None:
        return None
    if mode not in VLLM_MODES:
        return f"unknown --vllm mode {mode!r}: server or colocate (TRL's vLLM modes)"
    if mode == "server" and processes > 1:
        if level == "episode":
            return ("--level episode with --vllm server trains in one process (each rank's episodes take a different "
                    "number of turns, and TRL's server calls wait for every rank): use --vllm colocate, or one "
                    "process")
        return ("--vllm server trains in one process (TRL's server call gathers every rank's prompts under one "
                "answer-line regex, and each state has its own grammar): use --vllm colocate, or one process")
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return (f"--vllm {mode} needs vLLM, which is not installed (pip install vllm, a version TRL supports, "
                f"on a machine with a GPU); without --vllm, GRPO generates with transformers")
    return None


@dataclass(frozen=True)
class TrainOptions:
    method: str = "sft"  # sft | grpo
    threshold: Optional[float] = 0.0
    correction: Optional[str] = None  # None | 'reference' | a litellm model string
    max_examples: Optional[int] = None
    backend: str = "local"  # 'local' | 'remote' (SFT only)
    base: Optional[str] = None  # local: HF model dir, None/'default' = embedded SmolLM2-135M
    remote_model: Optional[str] = None  # remote: e.g. openai/gpt-4o-mini-2024-07-18
    train: TrainConfig = field(default_factory=TrainConfig)
    grpo: GrpoConfig = field(default_factory=GrpoConfig)
    eval_episodes: Optional[int] = None  # default: the source run's
    step_cap: Optional[int] = None  # default: the source run's
    out_dir: Optional[Path] = None  # default: training_root()
    cache_dir: Optional[Path] = None  # where the converted default base is kept
    # also evaluate every (local) checkpoint with replies that break the answer contract regenerated
    # under the game's grammar: an evaluation run of its own, every repair stored with its step
    repair: bool = False


@dataclass(frozen=True)
class DistillOptions:
    """Two-phase consolidation of single-game experts into one student (and the ablations)."""

    rollout_episodes: int = 3  # exploration episodes each expert plays on its game (phase 1 data)
    rollout_step_cap: Optional[int] = None
    threshold: Optional[float] = None  # None: every reply of the expert; else self-score > threshold
    phase1: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=1))
    phase2_updates: int = 8  # on-policy optimizer steps
    phase2_batch: int = 2  # prompts per update
    phase2_learning_rate: float = 1e-4
    max_completion_length: int = 32
    temperature: float = 1.0
    beta: float = 1.0  # 1 = reverse KL (mode-seeking), TRL's generalised JSD
    save_every: int = 4
    ablations: bool = False  # off-policy only, on-policy only from the base, mixed multi-task SFT
    eval_episodes: Optional[int] = None  # default: each game's expert evaluation run's
    step_cap: Optional[int] = None
    out_dir: Optional[Path] = None
    cache_dir: Optional[Path] = None

    def as_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("out_dir", "cache_dir")}
        data["phase1"] = self.phase1.as_dict()
        return data
