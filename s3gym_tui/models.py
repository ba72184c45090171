"""The one vocabulary shared by engine, store and UI: runs, episodes, steps, summaries, checkpoints."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Annotated, Any, Iterable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from s3gym_games.seeds import EVAL_SEED_BASE, EXPLORE_SEED_BASE, Phase, phase_of_seed  # noqa: F401 - the protocol's

Pathway = Literal["none", "history", "summary", "trained"]
Actor = Literal["model", "human", "human-edit"]
PATHWAYS: tuple[str, ...] = ("none", "history", "summary", "trained")

# Labels of annotations (store/annotations.py) everyone has; the config's `labels` adds more.
DEFAULT_LABELS: tuple[str, ...] = ("mistake", "lucky", "insight", "leak?", "format")


# SQLite stores integers in 64 bits: a larger one cannot be stored (or compared in a query).
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
StoredInt = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]


def int64_problem(value: object) -> Optional[str]:
    """Why an integer cannot be stored (None when it can, or when it is no integer)."""
    if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        return (f"{value} is out of range: integers are stored in 64 bits "
                f"({INT64_MIN:,} to {INT64_MAX:,})")
    return None


def whole_number(text: str) -> Optional[int]:
    """'12' -> 12; None unless the text is ASCII digits (str.isdigit also takes '²', which int() refuses)."""
    text = str(text).strip()
    return int(text) if text.isascii() and text.isdigit() else None


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def explore_episode_id(run_id: str, index: int) -> str:
    """The id of a run's exploration episode `index` (also the key of experience state x = index)."""
    return f"{run_id}-x{index:03d}"


def eval_episode_id(run_id: str, x: int, j: int) -> str:
    """The id of evaluation episode j at checkpoint x of a run."""
    return f"{run_id}-c{x:03d}-e{j}"


def is_explore_episode_id(run_id: str, episode_id: str) -> bool:
    prefix = f"{run_id}-x"
    return episode_id.startswith(prefix) and episode_id[len(prefix):].isdigit()


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

# ----- model arguments (checked where a RunConfig is made; parsed in engine.decoding) -----------------
RESERVED_ARGS = frozenset({"model", "messages", "stream", "api_base", "base_url", "num_retries", "n"})
_ARG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


class ModelArgError(ValueError):
    """A `--model-arg` that cannot be used (one line)."""


def unstorable_number(value: Any) -> Optional[str]:
    """Why an integer inside a model argument's value (nested in lists and objects too) cannot be stored
    (SQLite's are 64-bit), None when every one can."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return next(filter(None, map(unstorable_number, value)), None)
    return int64_problem(value)


def check_arg_name(key: str) -> None:
    if not _ARG_NAME.match(key):
        raise ModelArgError(f"--model-arg {key!r}: not a parameter name")
    if key in RESERVED_ARGS:
        raise ModelArgError(f"--model-arg {key}: set by s3gym itself (use its own flag)")



class RunConfig(Frozen):
    """Everything that defines a run (all pathways of a comparison share all but `pathway`)."""

    model: str
    game: str
    pathway: Pathway = "none"
    explore_episodes: int = Field(30, ge=0, le=10_000)
    eval_every: int = Field(3, ge=1, le=INT64_MAX)
    eval_episodes: int = Field(3, ge=0, le=100)
    explore_seed_base: int = Field(EXPLORE_SEED_BASE, ge=0, lt=EVAL_SEED_BASE)
    eval_seed_base: int = Field(EVAL_SEED_BASE, ge=EVAL_SEED_BASE)
    history_budget: int = Field(100_000, ge=0, le=INT64_MAX)
    max_tokens: int = Field(14_000, ge=1, le=INT64_MAX)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    decoding_seed: Optional[StoredInt] = None
    api_base: Optional[str] = None
    api_bases: tuple[str, ...] = ()  # replicas of the model (vLLM, SGLang, llama.cpp servers): litellm's
    # Router spreads the calls over them (used instead of api_base)
    step_cap: int = Field(64, ge=1, le=64)
    oracle_feedback: bool = False  # ablation: show verifier rewards to the agent (recorded on the run)
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(4, ge=0, le=20)
    # free: the model writes what it likes; grammar: its server constrains every action reply to the
    # game's action grammar (engine.decoding), which changes what is measured: shown with the model
    decoding: Literal["free", "grammar"] = "free"
    model_args: dict[str, Any] = Field(default_factory=dict)  # provider arguments passed through litellm
    # (stored without secrets: engine.decoding.storable_args)
    context_tokens: Optional[int] = Field(None, ge=1)  # the context its server stated (engine.servers)
    server_kind: Optional[str] = None  # llama.cpp, vllm, sglang, ollama, lmstudio, hosted, ... (engine.servers)

    @field_validator("model_args")
    @classmethod
    def _model_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key, item in value.items():
            check_arg_name(str(key))
            if unstorable_number(item):
                raise ValueError(f"model argument {key}: {unstorable_number(item)}")
        return value

    @field_validator("game")
    @classmethod
    def _known_game(cls, value: str) -> str:
        from s3gym_games import canonical

        return canonical(value)

    @model_validator(mode="after")
    def _seeds_stay_in_their_range(self) -> "RunConfig":
        """Every exploration seed below EVAL_SEED_BASE, else the run could never finish."""
        last = self.explore_seed_base + self.explore_episodes - 1
        if self.explore_episodes and last >= EVAL_SEED_BASE:
            raise ValueError(f"explore_seed_base {self.explore_seed_base} with {self.explore_episodes} "
                             f"episodes reaches seed {last}, an evaluation seed (>= {EVAL_SEED_BASE:,})")
        return self

    @field_validator("api_bases")
    @classmethod
    def _replicas(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bases = tuple(str(b).strip() for b in value)
        if any(not b for b in bases):
            raise ValueError("an api base is empty")
        if len(set(bases)) != len(bases):
            raise ValueError("an api base is named twice")
        return bases

    @model_validator(mode="after")
    def _one_kind_of_base(self) -> "RunConfig":
        if self.api_base and self.api_bases:
            raise ValueError("give either api_base or api_bases (the replicas), not both")
        return self

    def checkpoints(self) -> list[int]:
        """Exploration counts at which evaluation happens: 0, every, 2*every, ..., explore_episodes."""
        xs = list(range(0, self.explore_episodes + 1, self.eval_every))
        if xs[-1] != self.explore_episodes:
            xs.append(self.explore_episodes)
        return xs

    def explore_seed(self, index: int) -> int:
        return self.explore_seed_base + index

    def eval_seed(self, index: int) -> int:
        return self.eval_seed_base + index


class Run(Frozen):
    id: str
    config: RunConfig
    status: Literal["created", "running", "finished", "failed", "stopped"] = "created"
    created_at: str = Field(default_factory=utcnow)
    note: str = ""
    sweep_id: Optional[str] = None  # the sweep that created this run, if any
    status_reason: str = ""  # why it stopped or failed (empty while it runs or once finished)


class Episode(Frozen):
    id: str
    run_id: Optional[str]
    game: str
    mode: Phase
    phase: Phase
    seed: int
    index: int  # exploration episode index, or eval episode index within its checkpoint
    checkpoint: Optional[int] = None  # x for evaluation episodes
    model: str
    pathway: Pathway
    status: Literal["running", "finished", "failed", "stopped"] = "running"
    score: Optional[float] = None  # verifier score y (benchmark side)
    n_steps: int = 0
    summary_id: Optional[str] = None  # summary version the agent saw
    history_episode_ids: tuple[str, ...] = ()  # previous episodes fed as history (after the cut)
    history_cut: int = 0  # how many oldest previous episodes were dropped for the budget
    fork_of: Optional[str] = None  # episode id this one was forked from
    fork_step: Optional[int] = None  # number of source steps replayed before the fork
    # What the episode may see (engine.visibility): exploration episodes 0..experience_x-1 of
    # experience_run_id, and the summary version of that state. experience_source says who decided:
    # 'state' (a run's own episode), 'source' (a fork reproducing its source's context), 'chosen'
    # (experience a person chose: a borrow, a summary trial), 'none'. None: stored before v7.
    experience_run_id: Optional[str] = None
    experience_x: Optional[int] = Field(None, ge=0)
    experience_source: Optional[Literal["state", "source", "chosen", "none"]] = None
    started_at: str = Field(default_factory=utcnow)
    finished_at: Optional[str] = None


class Step(Frozen):
    episode_id: str
    index: int
    observation: str  # what the agent saw before acting
    prompt: str  # the messages as sent, JSON
    reply: str
    action: str
    self_score: Optional[float]  # None = missing in the reply (not 0)
    reward: float  # verifier reward r (never shown to the agent in the main setting)
    feedback: str
    valid: bool
    terminated: bool
    truncated: bool
    actor: Actor = "model"
    proposed_action: Optional[str] = None  # the model's action when a human edited or vetoed it
    fault: Optional[str] = None  # what went wrong with the model call, if anything
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float = 0.0
    cost: Optional[float] = None
    created_at: str = Field(default_factory=utcnow)
    # input tokens of its model call that the provider read from / wrote to its prompt cache (part of
    # tokens_in); None: the provider did not say (or no model call)
    tokens_cached: Optional[int] = Field(None, ge=0)
    tokens_cache_write: Optional[int] = Field(None, ge=0)


class Summary(Frozen):
    """One version of a run's summary memory (three parts, conditioned on self-scores)."""

    id: str
    run_id: str
    game: str
    version: int
    retain: str
    avoid: str
    next: str
    source_episode_ids: tuple[str, ...] = ()
    status: Literal["active", "vetoed"] = "active"
    pinned: bool = False
    author: str = "model"  # "model:<model>" or "human:<name>" (s3gym_tui.authors); old rows: "model", "human"
    parent_version: Optional[int] = None
    created_at: str = Field(default_factory=utcnow)
    for_episode_id: Optional[str] = None  # the exploration episode whose step 0 produced it
    tokens_in: int = 0  # the summary call's usage and cost (None: unknown price)
    tokens_out: int = 0
    cost: Optional[float] = None

    def as_tips(self) -> str:
        return (f"Strategies to retain:\n{self.retain.strip()}\n\n"
                f"Mistakes to avoid:\n{self.avoid.strip()}\n\n"
                f"Directions for the next episode:\n{self.next.strip()}")


def summary_in_use(versions: Iterable[Summary], upto: Optional[int] = None) -> Optional[Summary]:
    """The rule of summary memory: the version the agent goes by is the newest pinned active one,
    else the newest active one; vetoed versions are skipped (None: no active version).
    `upto`: as it stood when version `upto` was the newest. The runner, the store (the state an
    episode begins with) and the curation messages all decide with this one function."""
    seen = [s for s in versions if s.status == "active" and (upto is None or s.version <= upto)]
    pinned = [s for s in seen if s.pinned]
    return max(pinned or seen, key=lambda s: s.version, default=None)


class Checkpoint(Frozen):
    run_id: str
    x: int
    episode_ids: tuple[str, ...]
    scores: tuple[float, ...]

    @property
    def mean(self) -> Optional[float]:
        """Mean verifier score of the checkpoint's episodes; None (missing, never 0) without any."""
        return sum(self.scores) / len(self.scores) if self.scores else None


SWEEP_PATHWAYS: tuple[str, ...] = ("none", "history", "summary")
MODEL_FAMILIES: tuple[str, ...] = ("scripted", "fault", "learner")  # `scripted` means scripted/<game> per game


class SweepConfig(Frozen):
    """A sweep: every (game, pathway, model) with shared run settings, and how to run them."""

    games: tuple[str, ...] = Field(min_length=1)
    pathways: tuple[Literal["none", "history", "summary"], ...] = Field(min_length=1)
    models: tuple[str, ...] = Field(min_length=1)  # litellm strings, or a family (MODEL_FAMILIES)
    settings: dict[str, Any] = Field(default_factory=dict)  # RunConfig fields shared by every run
    api_bases: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # model -> its replicas
    concurrency: int = Field(4, ge=1, le=4096)  # model calls in flight per model
    runs_per_model: int = Field(4, ge=1, le=4096)  # runs of one model going at once
    budget_usd: Optional[float] = Field(None, gt=0)

    @field_validator("games")
    @classmethod
    def _known_games(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from s3gym_games import canonical

        games_ = tuple(dict.fromkeys(canonical(g) for g in value))
        return games_

    @field_validator("pathways", "models")
    @classmethod
    def _distinct(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not str(v).strip() for v in value):
            raise ValueError("an empty name")
        return tuple(dict.fromkeys(str(v).strip() for v in value))

    def model_for(self, model: str, game: str) -> str:
        """The litellm string that plays `game` for `model` (a family becomes `<family>/<game>`)."""
        return f"{model}/{game}" if model in MODEL_FAMILIES else model

    def run_configs(self) -> list[RunConfig]:
        """Every run of the sweep, model by model, then game, then pathway."""
        runs = []
        for model in self.models:
            for game in self.games:
                for pathway in self.pathways:
                    name = self.model_for(model, game)
                    bases = self.api_bases.get(model) or self.api_bases.get(name) or ()
                    extra = {"api_bases": tuple(bases)} if len(bases) > 1 else (
                        {"api_base": bases[0]} if bases else {})
                    runs.append(RunConfig(**{**self.settings, **extra, "model": name, "game": game,
                                             "pathway": pathway}))
        return runs


class Sweep(Frozen):
    id: str
    config: SweepConfig
    status: Literal["created", "running", "finished", "stopped", "failed"] = "created"
    created_at: str = Field(default_factory=utcnow)
    note: str = ""  # why it stopped, if it did
