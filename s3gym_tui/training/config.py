"""What a training is asked to do, one pydantic model per method (TRL's shape: SFTConfig, GRPOConfig...):
SftConfig, GrpoConfig, TaspoConfig (GRPO's subclass) and DistillConfig. Each field holds its default,
its help text, its allowed values and bounds; every rule that ties fields together is a validator of
the model. This is the single source of truth: `s3gym train` / `s3gym distill` build their options
from these fields (cli/recipe_options.py), a recipe file (`--config FILE`, YAML or TOML) is validated
by the same model, the library's defaults are the command's, and a training stores its recipe as the
model's dump with RECIPE_VERSION (`s3gym train --from TRAINING` re-runs it). Methods are found through
METHODS (a registry), never by testing strings.

Torch-free: the CLI builds and checks a recipe before the train extra is known to be installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

RECIPE_VERSION = 2  # 1: the settings before recipes (grpo / train dicts); 2: {"version", "method", "recipe"}

REPORT_TO = ("none", "tensorboard", "trackio", "wandb")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
SCHEDULERS = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup")
LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo")  # TRL 1.16's token-level losses
SCALE_REWARDS = ("group", "batch", "none")


def flag(name: str, help: str, *, applies: Optional[str] = None, **extra: Any) -> dict[str, Any]:
    """Field metadata: the command-line flag (default --<name with dashes>) and what it is for."""
    return {"description": help, "json_schema_extra": {"flag": name, **({"applies": applies} if applies else {}),
                                                        **extra}}


class TrainerSettings(BaseModel):
    """What every local trainer takes: the optimizer schedule, the adapter (or a full fine-tune), the
    seed, the precision and where its logs go."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False,
                              str_strip_whitespace=True)
    method: ClassVar[str] = ""

    learning_rate: float = Field(5e-4, gt=0, le=1, **flag("--lr", "Learning rate (TRL's 2e-5 is far too low for "
                                                                   "LoRA on the bundled model)."))
    lr_scheduler_type: Literal[SCHEDULERS] = Field(  # type: ignore[valid-type]
        "linear", **flag("--lr-scheduler", "Learning-rate schedule (transformers' names)."))
    warmup_ratio: float = Field(0.0, ge=0, lt=1, **flag("--warmup-ratio", "Share of the optimizer steps spent "
                                                                         "warming the learning rate up."))
    seed: int = Field(0, ge=0, **flag("--seed", "Training seed (weights' initialisation, data order, sampling)."))
    lora_r: int = Field(8, ge=1, le=1024, **flag("--lora-r", "LoRA rank."))
    lora_alpha: int = Field(16, ge=1, le=4096, **flag("--lora-alpha", "LoRA alpha (the adapter's scale is "
                                                                      "alpha / r)."))
    lora_dropout: float = Field(0.0, ge=0, lt=1, **flag("--lora-dropout", "LoRA dropout (> 0 keeps a dropped-out "
                                                                           "copy of every adapted input: more RAM)."))
    target_modules: Union[Literal["all-linear"], list[str]] = Field(
        "all-linear", **flag("--target-modules", "Modules LoRA adapts: all-linear, or names separated by commas "
                                                 "(q_proj,v_proj).", kind="list"))
    full_finetune: bool = Field(False, **flag("--full-finetune", "Train every weight instead of a LoRA adapter "
                                                                "(checkpoints are whole models: 0.5 GB each for the "
                                                                "bundled model)."))
    gradient_checkpointing: bool = Field(True, **flag("--gradient-checkpointing", "Less RAM, about 35% slower on "
                                                                                  "the CPU."))
    precision: Literal[PRECISIONS] = Field(  # type: ignore[valid-type]
        "auto", **flag("--precision", "auto (bf16 on a GPU that has it, else fp32) | fp32 | bf16 | fp16; bf16 and "
                                      "fp16 only where the device allows (checked when the device is known)."))
    report_to: Literal[REPORT_TO] = Field(  # type: ignore[valid-type]
        "none", **flag("--report-to", "Where TRL also logs: none | tensorboard | trackio | wandb (the logging dir "
                                      "is logs/ beside the training's adapters)."))
    use_cpu: Optional[bool] = Field(None, **flag("--cpu", "Train on the CPU even where a GPU is present.",
                                                 hidden=True))

    @model_validator(mode="before")
    @classmethod
    def _modules(cls, data: Any) -> Any:
        """`--target-modules q_proj,v_proj` (text) as a list; one plain module name is refused by peft."""
        if isinstance(data, dict) and isinstance(data.get("target_modules"), str) \
                and data["target_modules"] != "all-linear":
            names = [n.strip() for n in data["target_modules"].split(",") if n.strip()]
            data = {**data, "target_modules": names}
        return data

    @model_validator(mode="after")
    def _adapter(self) -> "TrainerSettings":
        lora = {"lora_r", "lora_alpha", "lora_dropout", "target_modules"} & self.model_fields_set
        if self.full_finetune and lora:
            raise ValueError(f"--full-finetune trains every weight: {', '.join(sorted(flag_of(n) for n in lora))} "
                             f"applies to a LoRA adapter only")
        if isinstance(self.target_modules, list) and not self.target_modules:
            raise ValueError("--target-modules names no module")
        return self

    # ----- the recipe as a whole ----------------------------------------------------------------
    def dump(self) -> dict[str, Any]:
        """The stored recipe: {version, method, recipe} (the model's own JSON dump)."""
        return {"version": RECIPE_VERSION, "method": self.method, "recipe": self.model_dump(mode="json")}

    @classmethod
    def fields_for_cli(cls) -> dict[str, Any]:
        return {n: f for n, f in cls.model_fields.items()}


class ExpertRecipe(TrainerSettings):
    """What an expert training (SFT, GRPO, TASPO) takes besides its trainer: the base model and how its
    checkpoints are evaluated."""

    base: str = Field("default", min_length=1, **flag(
        "--base", "'default' (the bundled SmolLM2-135M), an HF model directory, or a hub id "
                  "(owner/name[@revision], from the Hugging Face cache or hub)."))
    eval_episodes: Optional[int] = Field(None, ge=0, le=1000, **flag(
        "--eval-episodes", "Evaluation episodes per checkpoint (default: the run's)."))
    step_cap: Optional[int] = Field(None, ge=1, le=64, **flag("--step-cap", "Steps per evaluation episode "
                                                                             "(default: the run's)."))
    grammar_eval: bool = Field(True, **flag(
        "--grammar-eval", "Also evaluate every checkpoint, the base included, with its replies constrained to the "
                          "game's grammar from the first token: the baseline that tells a format gain (replies "
                          "that now parse) from a play gain (a run of its own; local checkpoints)."))
    repair: bool = Field(False, **flag(
        "--repair", "Also evaluate every checkpoint with replies that break the answer format regenerated under the "
                    "game's grammar (a run of its own; each repair stored with its step)."))


class SftConfig(ExpertRecipe):
    """SFT on a run's self-judged dataset (TRL's SFTTrainer), locally or as a remote fine-tuning job."""

    method: ClassVar[str] = "sft"

    threshold: float = Field(0.0, ge=-1e6, le=1e6, **flag("--threshold", "Keep steps whose self-score is above "
                                                                           "this."))
    correction: str = Field("none", min_length=1, **flag("--correction", "none | reference | a litellm model "
                                                                         "string (replaces dropped steps' actions)."))
    max_examples: Optional[int] = Field(None, ge=1, **flag("--max-examples", "Stop after N examples."))
    max_length: Optional[int] = Field(None, ge=16, **flag("--max-length", "Drop (and name) examples longer than "
                                                                          "N tokens; default: cut nothing."))
    epochs: int = Field(2, ge=1, le=1000, **flag("--epochs", "Training epochs (one checkpoint each)."))
    max_steps: int = Field(-1, **flag("--max-steps", "Cap on optimizer steps (overrides --epochs); -1: "
                                                            "follow --epochs."))
    batch_size: int = Field(1, ge=1, le=4096, **flag("--batch-size", "Examples per forward pass (RAM grows with "
                                                                     "it)."))
    grad_accum: int = Field(4, ge=1, le=4096, **flag("--grad-accum", "Micro-batches accumulated per optimizer "
                                                                     "step."))
    backend: Literal["local", "remote"] = Field("local", **flag("--backend", "local (TRL) | remote (the "
                                                                             "provider's fine-tuning API)."))
    remote_model: Optional[str] = Field(None, min_length=1, **flag("--remote-model", "The remote base, e.g. "
                                                                                     "openai/gpt-4o-mini-2024-07-18."))

    @model_validator(mode="before")
    @classmethod
    def _remote_defaults(cls, data: Any) -> Any:
        """A remote job's checkpoints cannot be served constrained: its grammar evaluation is off unless asked."""
        if isinstance(data, dict) and data.get("backend") == "remote" and "grammar_eval" not in data:
            data = {**data, "grammar_eval": False}
        return data

    @model_validator(mode="after")
    def _rules(self) -> "SftConfig":
        if self.max_steps != -1 and self.max_steps < 1:
            raise ValueError("--max-steps must be -1 (follow --epochs) or at least 1")
        if self.backend == "remote":
            if not self.remote_model:
                raise ValueError("--backend remote needs --remote-model (e.g. openai/gpt-4o-mini-2024-07-18)")
            if self.repair or self.grammar_eval:
                raise ValueError("--repair and --grammar-eval need --backend local: only locally served checkpoints "
                                 "can be constrained")
        elif self.remote_model is not None:
            raise ValueError("--remote-model names the base of --backend remote")
        return self


class GrpoConfig(ExpertRecipe):
    """GRPO on the game's states (TRL's GRPOTrainer): each update samples `num_generations` replies at each
    of `states_per_update` states the current policy reaches on the run's exploration seeds."""

    method: ClassVar[str] = "grpo"

    learning_rate: float = Field(1e-4, gt=0, le=1, **flag("--lr", "Learning rate."))
    reward: Literal["self", "stated", "oracle"] = Field("self", **flag(
        "--reward", "self (the agent's own judgement, by the frozen base) | stated (the score the reply states) | "
                    "oracle (the verifier's reward: the ablation, recorded as such)."))
    updates: int = Field(8, ge=1, le=100_000, **flag("--updates", "Optimizer steps."))
    num_generations: int = Field(4, ge=2, le=1024, **flag("--generations", "G: replies sampled per state (per "
                                                                           "seed at --level episode)."))
    states_per_update: int = Field(2, ge=1, le=1024, **flag("--states-per-update", "Groups per optimizer step "
                                                                                   "(states; at --level episode, "
                                                                                   "seeds)."))
    save_every: int = Field(4, ge=1, **flag("--save-every", "A checkpoint every N updates (and at the end)."))
    episodes: Optional[int] = Field(None, ge=1, le=10_000, **flag("--rollout-episodes", "Exploration seeds to roll "
                                                                                         "out on (default: the "
                                                                                         "run's)."))
    rollout_step_cap: Optional[int] = Field(None, ge=1, le=64, **flag("--rollout-step-cap", "Steps per rollout "
                                                                                           "episode."))
    max_completion_length: int = Field(32, ge=4, le=8192, **flag("--completion-tokens", "Tokens per sampled "
                                                                                        "reply."))
    temperature: float = Field(1.0, gt=0, le=10, **flag("--temperature", "Sampling temperature of the rollouts "
                                                                         "(higher: more diverse groups)."))
    top_p: float = Field(1.0, gt=0, le=1, **flag("--top-p", "Nucleus sampling of the rollouts (1: off)."))
    beta: float = Field(0.0, ge=0, le=100, **flag("--beta", "KL coefficient to the base (TRL's; 0: no KL term, no "
                                                            "reference pass)."))
    loss_type: Literal[LOSS_TYPES] = Field("dapo", **flag(  # type: ignore[valid-type]
        "--loss-type", "TRL's loss aggregation: dapo | grpo | dr_grpo | bnpo | cispo | sapo."))
    epsilon: float = Field(0.2, gt=0, le=10, **flag("--epsilon", "Clipping epsilon of the policy ratio."))
    epsilon_high: Optional[float] = Field(None, gt=0, le=10, **flag("--epsilon-high", "Upper clipping epsilon "
                                                                                      "(default: --epsilon; DAPO: "
                                                                                      "0.28)."))
    num_iterations: int = Field(1, ge=1, le=64, **flag("--iterations", "Optimizer passes over each generated batch "
                                                                       "(TRL's num_iterations, mu)."))
    scale_rewards: Literal[SCALE_REWARDS] = Field("group", **flag(  # type: ignore[valid-type]
        "--scale-rewards", "Advantage scaling: group (by the group's std) | batch | none (Dr. GRPO)."))
    judge_max_new_tokens: int = Field(8, ge=4, le=64, **flag("--judge-tokens", "Tokens of the frozen judge's "
                                                                               "score.", hidden=True))
    level: Literal["step", "episode"] = Field("step", **flag(
        "--level", "step (a group is G replies at one state) | episode (G whole episodes on one exploration seed)."))
    sampling: Literal["mixed", "constrained", "free"] = Field("mixed", **flag(
        "--sampling", "mixed (half of each group under the answer-line grammar, half free) | constrained | free."))
    format_weight: float = Field(1.0, ge=0, le=100, **flag("--format-weight", "Taken off the reward of a reply "
                                                                              "without a parsable action."))
    warm_start: int = Field(16, ge=0, le=10_000, **flag(
        "--warm-start", "Before the first update, fine-tune on this many of the base's own replies written under "
                        "the answer-line grammar at states it reaches on the exploration seeds (teaches the answer "
                        "line; no reward is read). 0: none."))
    warm_start_epochs: int = Field(2, ge=1, le=100, **flag("--warm-start-epochs", "Passes over the --warm-start "
                                                                                  "examples."))
    vllm: Optional[Literal["server", "colocate"]] = Field(None, **flag(
        "--vllm", "Sample replies with vLLM (TRL's modes): server (a `trl vllm-serve --model BASE` server) | "
                  "colocate. Needs vLLM (a GPU in practice)."))
    vllm_url: Optional[str] = Field(None, min_length=1, **flag("--vllm-url", "--vllm server: the server's base URL "
                                                                             "(default: TRL's)."))

    @model_validator(mode="after")
    def _rules(self) -> "GrpoConfig":
        if self.vllm_url is not None and self.vllm != "server":
            raise ValueError("--vllm-url names the server of --vllm server")
        if self.epsilon_high is not None and self.epsilon_high < self.epsilon:
            raise ValueError("--epsilon-high must be at least --epsilon")
        if self.full_finetune and (self.reward == "self" or self.beta > 0):
            raise ValueError("--full-finetune with GRPO: the frozen judge (--reward self) and the KL reference "
                             "(--beta) are the base with the adapter switched off, which needs LoRA")
        return self


class TaspoConfig(GrpoConfig):
    """TASPO: episode-level GRPO whose per-token advantages are A_i * w_it (training/taspo.py)."""

    method: ClassVar[str] = "taspo"

    level: Literal["step", "episode"] = Field("episode", **flag("--level", "TASPO is episode-level GRPO: episode."))
    credit: Literal["action", "token", "uniform"] = Field("action", **flag(
        "--credit", "action (weights per action) | token (per token) | uniform (w = 1: plain GRPO through the same "
                    "path)."))
    kappa: float = Field(0.05, ge=0, le=100, **flag("--kappa", "Shifts below this are noise (filtered)."))
    tau: float = Field(1.0, ge=1e-6, le=1e6, **flag("--tau", "Temperature of tanh."))
    eps_w: float = Field(0.5, ge=0, le=1, **flag("--eps-w", "Weights stay in [1 - eps_w, 1 + eps_w]."))
    pi_source: Literal["siblings", "off-trajectory"] = Field("siblings", **flag(
        "--pi-source", "siblings (successful rollouts of the same seed) | off-trajectory (of other seeds: the "
                       "ablation)."))
    analyzer: Optional[str] = Field(None, min_length=1, **flag("--analyzer", "The model that writes PI (default: "
                                                                             "the run's model)."))

    @model_validator(mode="after")
    def _taspo(self) -> "TaspoConfig":
        if self.level != "episode":
            raise ValueError("taspo is episode-level GRPO: leave out --level or give --level episode")
        if self.vllm is not None:
            raise ValueError("--vllm applies to GRPO (--method grpo): its rollouts are what vLLM generates")
        return self


class DistillConfig(TrainerSettings):
    """Two-phase consolidation of single-game experts into one student (training/distill.py): off-policy SFT
    on the experts' trajectories, then on-policy reverse KL (TRL's DistillationTrainer)."""

    method: ClassVar[str] = "distill"

    learning_rate: float = Field(1e-4, gt=0, le=1, **flag("--lr", "Phase 2 learning rate."))
    phase1_learning_rate: float = Field(5e-4, gt=0, le=1, **flag("--phase1-lr", "Phase 1 (SFT) learning rate."))
    rollout_episodes: int = Field(3, ge=1, le=10_000, **flag("--rollout-episodes", "Exploration episodes each "
                                                                                  "expert plays on its game "
                                                                                  "(phase 1 data)."))
    rollout_step_cap: Optional[int] = Field(None, ge=1, le=64, **flag("--rollout-step-cap", "Steps per expert "
                                                                                           "episode."))
    threshold: Optional[float] = Field(None, ge=-1e6, le=1e6, **flag(
        "--threshold", "Keep expert steps whose self-score is above this (default: every reply of the expert)."))
    epochs: int = Field(1, ge=1, le=1000, **flag("--epochs", "Phase 1 (off-policy SFT) epochs."))
    phase1_steps: int = Field(-1, **flag("--phase1-steps", "Cap on phase 1 optimizer steps (-1: follow "
                                                                  "--epochs)."))
    batch_size: int = Field(1, ge=1, le=4096, **flag("--batch-size", "Phase 1 examples per forward pass."))
    grad_accum: int = Field(4, ge=1, le=4096, **flag("--grad-accum", "Phase 1 micro-batches per optimizer step."))
    updates: int = Field(8, ge=1, le=100_000, **flag("--updates", "Phase 2 (on-policy) optimizer steps."))
    batch: int = Field(2, ge=1, le=1024, **flag("--batch", "Phase 2 prompts per update."))
    max_completion_length: int = Field(32, ge=4, le=8192, **flag("--completion-tokens", "Phase 2: tokens per "
                                                                                        "reply."))
    temperature: float = Field(1.0, gt=0, le=10, **flag("--temperature", "Phase 2 sampling temperature."))
    beta: float = Field(1.0, ge=0, le=1, **flag("--beta", "Phase 2 generalised JSD: 1 = reverse KL "
                                                          "(mode-seeking), 0 = forward KL."))
    save_every: int = Field(4, ge=1, **flag("--save-every", "Phase 2: a checkpoint every N updates."))
    ablations: bool = Field(False, **flag("--ablations", "Also: off-policy only, on-policy only from the base, "
                                                         "mixed multi-task SFT (same budget)."))
    eval_episodes: Optional[int] = Field(None, ge=1, le=1000, **flag("--eval-episodes", "Default: each game's "
                                                                                        "expert evaluation run's."))
    step_cap: Optional[int] = Field(None, ge=1, le=64, **flag("--step-cap", "Steps per evaluation episode."))

    @model_validator(mode="after")
    def _rules(self) -> "DistillConfig":
        if self.full_finetune:
            raise ValueError("--full-finetune: distillation students are LoRA adapters (the teacher holds every "
                             "expert as an adapter of one base)")
        if self.phase1_steps != -1 and self.phase1_steps < 1:
            raise ValueError("--phase1-steps must be -1 (follow --epochs) or at least 1")
        return self

    def phase1(self, max_steps: Optional[int] = None) -> SftConfig:
        """The SFT recipe of phase 1 (and of the SFT ablations, with their step budget)."""
        shared = {k: getattr(self, k) for k in TrainerSettings.model_fields if k != "learning_rate"}
        return SftConfig(**shared, learning_rate=self.phase1_learning_rate, epochs=self.epochs,
                         max_steps=self.phase1_steps if max_steps is None else max_steps,
                         batch_size=self.batch_size, grad_accum=self.grad_accum, grammar_eval=False)


# ----- the registry ------------------------------------------------------------------------------
METHODS: dict[str, type[ExpertRecipe]] = {"sft": SftConfig, "grpo": GrpoConfig, "taspo": TaspoConfig}
RECIPES: dict[str, type[TrainerSettings]] = {**METHODS, "distill": DistillConfig}


class RecipeError(ValueError):
    """A recipe that cannot be used (one line naming the flag or the file)."""


def recipe_class(method: str) -> type[TrainerSettings]:
    try:
        return RECIPES[method]
    except KeyError:
        raise RecipeError(f"unknown method {method!r}: {', '.join(METHODS)}") from None


def flag_of(name: str, cls: type[BaseModel] = TaspoConfig) -> str:
    """The command-line flag of a field (of any recipe)."""
    for model in (cls, *RECIPES.values()):
        field = model.model_fields.get(name)
        if field is not None and isinstance(field.json_schema_extra, dict):
            return str(field.json_schema_extra.get("flag") or f"--{name.replace('_', '-')}")
    return f"--{name.replace('_', '-')}"


def methods_with(name: str) -> list[str]:
    """The methods whose recipe has field `name`."""
    return [m for m, cls in RECIPES.items() if name in cls.model_fields]


MODEL_NAME_FIELDS = frozenset({"base", "correction", "remote_model", "analyzer"})
"""Recipe fields that name a model (an empty one is refused as such)."""


def recipe_error(exc: Exception, cls: type[BaseModel]) -> RecipeError:
    """A pydantic ValidationError as one line naming the flag (`--lora-r 0: Input should be ...`)."""
    first = exc.errors()[0]  # type: ignore[attr-defined]
    loc = [str(p) for p in first.get("loc", ()) if not isinstance(p, int)]
    message = str(first.get("msg", "")).removeprefix("Value error, ")
    if not loc:
        return RecipeError(message)
    name = loc[0]
    if first.get("type") == "extra_forbidden":
        owners = [m for m in methods_with(name) if m != cls.method]
        where = f"applies to {', '.join(owners)}, not {cls.method}" if owners else "is not a setting of any method"
        return RecipeError(f"{flag_of(name)} {where}")
    given = first.get("input")
    if isinstance(given, float):
        given = f"{given:g}"
    shown = f" {given}" if isinstance(given, (int, str)) and not isinstance(given, bool) and len(str(given)) <= 40 \
        else ""
    if first.get("type") == "string_too_short":
        what = "a model name" if name in MODEL_NAME_FIELDS else "it"
        return RecipeError(f"{flag_of(name, cls)}: {what} cannot be empty")
    if message.startswith("Input should be "):  # pydantic's wording in the house's: '--lr must be greater than 0 (given -1)'
        wanted = message.removeprefix("Input should be ").replace("greater than or equal to", "at least") \
            .replace("less than or equal to", "at most")
        return RecipeError(f"{flag_of(name, cls)} must be {wanted}"
                           + (f" (given{shown})" if shown else ""))
    return RecipeError(f"{flag_of(name, cls)}{shown}: {message}")


def build(method: str, values: dict[str, Any]) -> TrainerSettings:
    """The method's recipe from `values` (field names), validated once, here; RecipeError (one line) if not."""
    from pydantic import ValidationError

    cls = recipe_class(method)
    try:
        return cls(**values)
    except ValidationError as exc:
        raise recipe_error(exc, cls) from None


def read_recipe_file(path: Path) -> dict[str, Any]:
    """A recipe file's settings (YAML or TOML, by its suffix; TRL's `--config recipe.yaml`): a flat mapping
    of field names (or their flags without the dashes) to values; `method` may be one of them."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecipeError(f"cannot read the recipe {path}: {exc.strerror or exc}") from None
    try:
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(text)
        elif path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            raise RecipeError(f"{path}: a recipe is a .yaml, .yml or .toml file")
    except RecipeError:
        raise
    except Exception as exc:  # noqa: BLE001 - yaml.YAMLError, tomllib.TOMLDecodeError: one line
        raise RecipeError(f"{path} is not valid {path.suffix.lstrip('.').upper()}: "
                          f"{' '.join(str(exc).split())[:200]}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of settings (name: value)")
    if isinstance(data.get("recipe"), dict) and "version" in data:  # a stored dump written to a file
        data = {"method": data.get("method"), **data["recipe"]}
    return {field_name(str(k)): v for k, v in data.items()}


def field_name(key: str) -> str:
    """A recipe key as a field name: `lr`, `--lr`, `completion-tokens` -> learning_rate, max_completion_length."""
    bare = key.lstrip("-")
    for cls in RECIPES.values():
        for name, field in cls.model_fields.items():
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            if str(extra.get("flag", "")).lstrip("-") == bare:
                return name
    return bare.replace("-", "_")


def stored_recipe(settings: dict[str, Any], method: str) -> TrainerSettings:
    """The recipe a training was stored with: the dump (version 2) as it is, or the settings an older
    s3gym stored (version 1: `train` and `grpo` dicts, with the defaults of then where a key is missing)."""
    if settings.get("version") == RECIPE_VERSION and isinstance(settings.get("recipe"), dict):
        return recipe_class(settings.get("method") or method)(**settings["recipe"])
    return legacy_recipe(settings, method)


def legacy_recipe(settings: dict[str, Any], method: str) -> TrainerSettings:
    """A version-1 training's settings as its recipe (the library defaults of then: no warm start, free
    sampling without a format term before those were recorded)."""
    train = dict(settings.get("train") or {})
    trainer = {k: train[k] for k in ("learning_rate", "lora_r", "lora_alpha", "lora_dropout", "target_modules",
                                     "gradient_checkpointing", "seed", "use_cpu") if k in train}
    common = {k: settings[k] for k in ("eval_episodes", "step_cap") if settings.get(k) is not None}
    common["repair"] = bool(settings.get("repair"))
    common["grammar_eval"] = False  # a training of then had no evaluation under the grammar
    cls = recipe_class(method)
    if cls is SftConfig:
        sft = {k: train[k] for k in ("epochs", "max_steps", "batch_size", "grad_accum", "max_length") if k in train}
        sft.update({k: settings[k] for k in ("threshold", "max_examples") if settings.get(k) is not None})
        if settings.get("correction"):
            sft["correction"] = settings["correction"]
        if settings.get("remote_model"):
            sft.update(backend="remote", remote_model=settings["remote_model"])
        return SftConfig.model_construct(**{**SftConfig().model_dump(), **trainer, **common, **sft})
    grpo = {"sampling": "free", "format_weight": 0.0, "warm_start": 0, **dict(settings.get("grpo") or {})}
    if grpo.get("credit") is None:
        for key in ("credit", "kappa", "tau", "eps_w", "pi_source", "analyzer"):
            grpo.pop(key, None)
    known = {k: v for k, v in grpo.items() if k in cls.model_fields}
    return cls.model_construct(**{**cls().model_dump(), **trainer, **common, **known})


__all__ = ["DistillConfig", "ExpertRecipe", "GrpoConfig", "METHODS", "RECIPES", "RECIPE_VERSION", "RecipeError",
           "SftConfig", "TaspoConfig", "TrainerSettings", "build", "field_name", "flag_of", "legacy_recipe",
           "methods_with", "read_recipe_file", "recipe_class", "recipe_error", "stored_recipe"]
