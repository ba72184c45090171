"""`trained/<training_id>/<epoch>`: a LoRA-trained model served through litellm (epoch 0 = the base).

Loads the base model and the epoch's adapter with transformers + peft (cached, every call under one
lock) and generates with the tokenizer's chat template. Action calls:

1. The model's own reply is generated (greedy by default, at most FREE_MAX_NEW_TOKENS = 32, stopping after
   a complete `Answer: ..., Score: n` line) and returned as the model wrote it, parsed or not: the
   checkpoint is scored as it is.
2. `trained/<training_id>/<epoch>/grammar`: every action reply is generated under the game's answer-line
   grammar from its first token (constrain.py: the game's GBNF through llguidance), as the llama.cpp
   provider serves the bundled model: the base under the same constraint is the baseline that tells
   what a training gained in format from what it gained in play (evaluate.py).
3. Only for `trained/<training_id>/<epoch>/repair` (asked for with `--repair`), a reply that breaks the
   answer contract is regenerated from the same prompt under a constraint (a LogitsProcessor that
   only lets through tokens keeping `Answer: <action>, Score: <number>` matchable, with the game's GBNF:
   the same constraint as /grammar, applied after a free attempt).
   The response's `_hidden_params["s3gym"]` says `repaired: True` and keeps the free reply; the engine
   stores both with the step (store.trainings.step_repairs), so every count of repairs is read from the store.

Torch, transformers and peft are imported on first use; registering needs only litellm.
"""

from __future__ import annotations

import asyncio
import re
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import litellm
from litellm import CustomLLM
from litellm.types.utils import ModelResponse

from s3gym_tui.providers._common import bad_request, build_response, content_text, s3gym_context
from s3gym_tui.training.grammar import action_is_wellformed, answer_line
from s3gym_tui.training.runs import MANIFEST, read_manifest, training_root

PROVIDER = "trained"
MODEL_NAME = re.compile(r"^(?P<tid>[A-Za-z0-9][A-Za-z0-9_.:-]*)/(?P<epoch>\d+)(?P<decoding>/repair|/grammar)?$")
REPAIR_SUFFIX = "/repair"
FREE_MAX_NEW_TOKENS = 32
ANSWER_MAX_NEW_TOKENS = 384
SUMMARY_MAX_NEW_TOKENS = 664
CHAT_MAX_NEW_TOKENS = 1024


def parse_model(name: str) -> tuple[str, int]:
    """('<training_id>', epoch) of '<training_id>/<epoch>[/repair|/grammar]' (the part after `trained/`)."""
    match = MODEL_NAME.match(name or "")
    if not match:
        raise bad_request(f"bad trained model {name!r}: use trained/<training_id>/<checkpoint>[/repair|/grammar] "
                          f"(0 = the base)", f"{PROVIDER}/{name}", PROVIDER)
    return match.group("tid"), int(match.group("epoch"))


def repairs(name: str) -> bool:
    """True for '<training_id>/<epoch>/repair': replies breaking the answer contract are regenerated."""
    match = MODEL_NAME.match(name or "")
    return bool(match and match.group("decoding") == REPAIR_SUFFIX)


def constrains(name: str) -> bool:
    """True for '<training_id>/<epoch>/grammar': action replies are constrained from their first token."""
    match = MODEL_NAME.match(name or "")
    return bool(match and match.group("decoding") == "/grammar")


@dataclass(frozen=True)
class Served:
    training_id: str
    base_dir: Path
    adapters: dict[int, Path]


def _action_rule(ctx: dict) -> Optional[str]:
    if ctx.get("grammar"):
        return str(ctx["grammar"]).strip()
    try:
        import s3gym_games as games

        env = games.game_class(str(ctx["game"])).replay(str(ctx.get("mode") or "explore"), int(ctx.get("seed") or 0),
                                                        [str(a) for a in ctx.get("actions") or []])
        return env.action_grammar().strip()
    except Exception:  # noqa: BLE001 - no usable grammar: the bounded free-text fallback applies
        return None


class TrainedLLM(CustomLLM):
    """litellm custom provider `trained`; one lock around every model use (loading and generating)."""

    provider = PROVIDER

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.trainings: dict[str, Served] = {}
        self._bases: dict[str, dict[str, Any]] = {}  # base dir -> {"model", "tokenizer", "adapters", "pieces"}
        self.stats: dict[str, dict[str, int]] = {}

    # ----- which model ---------------------------------------------------------------------
    def add_training(self, training_id: str, base_dir: Path, adapters: dict[int, Path]) -> None:
        """Make `trained/<training_id>/<epoch>` servable in this process (also found via its manifest)."""
        with self.lock:
            self.trainings[training_id] = Served(training_id, Path(base_dir),
                                                 {int(k): Path(v) for k, v in adapters.items()})

    def release(self) -> None:
        """Drop every loaded model (before a training needs the memory); they reload on next use."""
        import gc

        with self.lock:
            self._bases.clear()
        gc.collect()

    def resolve(self, name: str) -> tuple[Served, int]:
        training_id, epoch = parse_model(name)
        served = self.trainings.get(training_id)
        if served is None:
            manifest = training_root() / training_id / MANIFEST
            if manifest.is_file():
                base_dir, adapters = read_manifest(manifest)
                served = Served(training_id, base_dir, adapters)
                self.trainings[training_id] = served
        if served is None:
            raise bad_request(f"unknown training {training_id!r} (no manifest under {training_root()})",
                              f"{PROVIDER}/{name}", PROVIDER)
        if epoch != 0 and epoch not in served.adapters:
            raise bad_request(f"training {training_id!r} has no checkpoint {epoch} (checkpoints: "
                              f"{', '.join(map(str, sorted(served.adapters))) or 'none'}; 0 = the base)",
                              f"{PROVIDER}/{name}", PROVIDER)
        return served, epoch

    def _entry(self, served: Served, model: str, whole: Optional[Path] = None) -> dict[str, Any]:
        """The loaded base (with any adapters attached so far), or a whole fine-tuned checkpoint (`whole`: a
        `--full-finetune` checkpoint, its weights a model of their own); call with the lock held."""
        key = str((whole or served.base_dir).resolve())
        entry = self._bases.get(key)
        if entry is None:
            try:
                import torch  # noqa: F401 - missing torch is reported as a missing extra
                from transformers import AutoModelForCausalLM, AutoTokenizer
            except ImportError:
                from s3gym_tui.training import missing_message, missing_modules

                raise bad_request(missing_message(missing_modules()), model, PROVIDER) from None
            from s3gym_tui.training.backend import quiet
            from s3gym_tui.training.device import pick_device

            device = pick_device()  # the same code serves a bigger model on a GPU box (CUDA or MPS)
            with quiet():
                tokenizer = AutoTokenizer.from_pretrained(served.base_dir)
                net = AutoModelForCausalLM.from_pretrained(whole or served.base_dir, dtype=device.dtype()).eval()
            if not device.use_cpu:
                net = net.to(device.kind)
            entry = {"model": net, "tokenizer": tokenizer, "adapters": set(), "pieces": None}
            self._bases[key] = entry
        return entry

    def _activate(self, entry: dict[str, Any], served: Served, epoch: int) -> Any:
        """Attach and select the epoch's adapter; returns a context manager for the generation."""
        import contextlib

        from peft import PeftModel

        model = entry["model"]
        if epoch == 0:
            return model.disable_adapter() if isinstance(model, PeftModel) else contextlib.nullcontext()
        name = re.sub(r"[^A-Za-z0-9_-]", "_", f"{served.training_id}__e{epoch}")
        if name not in entry["adapters"]:
            with warnings.catch_warnings():  # peft 0.21 calls a transformers API deprecated in 5.x
                warnings.simplefilter("ignore", FutureWarning)
                if isinstance(model, PeftModel):
                    model.load_adapter(str(served.adapters[epoch]), adapter_name=name)
                else:
                    model = PeftModel.from_pretrained(model, str(served.adapters[epoch]), adapter_name=name).eval()
                    entry["model"] = model
            entry["adapters"].add(name)
        model.set_adapter(name)
        return contextlib.nullcontext()

    # ----- generation ------------------------------------------------------------------------
    def generate(self, name: str, messages: list, ctx: Optional[dict], params: dict) -> dict[str, Any]:
        """One blocking, serialised completion: {'text', 'prompt_tokens', 'completion_tokens', 'repaired', ...}."""
        model_id = f"{PROVIDER}/{name}"
        served, epoch = self.resolve(name)
        chat = [{"role": str(m.get("role", "user")), "content": content_text(m.get("content"))} for m in messages]
        task = (ctx or {}).get("task")
        requested = params.get("max_tokens") or params.get("max_completion_tokens")
        import contextlib

        path = served.adapters.get(epoch) if epoch else None
        whole = path if path is not None and whole_model(path) else None
        with self.lock:
            entry = self._entry(served, model_id, whole)  # a missing train extra is reported here
            from s3gym_tui.training import decoding

            with contextlib.nullcontext() if whole else self._activate(entry, served, epoch):
                gen = decoding.Generator(entry, temperature=float(params.get("temperature") or 0.0),
                                         seed=int(params.get("seed") or 0))
                prompt = gen.prompt_ids(chat)
                window = int(getattr(entry["model"].config, "max_position_embeddings", 0) or 0)
                if window and prompt.shape[1] + FREE_MAX_NEW_TOKENS > window:
                    raise litellm.ContextWindowExceededError(
                        message=f"{prompt.shape[1]} prompt tokens do not fit the {window}-token window",
                        model=model_id, llm_provider=PROVIDER)
                stats = self.stats.setdefault(model_id, {"calls": 0, "repaired": 0})
                stats["calls"] += 1
                if task != "act":
                    cap = SUMMARY_MAX_NEW_TOKENS if task == "summary" else CHAT_MAX_NEW_TOKENS
                    text, n = gen.free(prompt, _cap(requested, cap))
                    return {"text": text, "prompt_tokens": prompt.shape[1], "completion_tokens": n,
                            "repaired": False, "task": task}
                grammar = _action_rule(ctx or {})
                if constrains(name):
                    line, m = gen.constrained(prompt, answer_line(grammar), _cap(requested, ANSWER_MAX_NEW_TOKENS))
                    return {"text": line, "prompt_tokens": prompt.shape[1], "completion_tokens": m,
                            "repaired": False, "task": task}
                text, n = gen.free(prompt, _cap(requested, FREE_MAX_NEW_TOKENS), stop_after_answer=True)
                if not repairs(name) or _follows_contract(text, grammar):
                    return {"text": text, "prompt_tokens": prompt.shape[1], "completion_tokens": n,
                            "repaired": False, "task": task}
                line, m = gen.constrained(prompt, answer_line(grammar), _cap(requested, ANSWER_MAX_NEW_TOKENS))
                stats["repaired"] += 1
                return {"text": line, "prompt_tokens": prompt.shape[1], "completion_tokens": n + m,
                        "repaired": True, "free_reply": text, "task": task}

    def _respond(self, name: str, result: dict, model_response: Optional[ModelResponse]) -> ModelResponse:
        extra = {k: result[k] for k in ("task", "repaired", "free_reply") if k in result}
        return build_response(model_response, f"{PROVIDER}/{name}", result["text"],
                              prompt_tokens=result["prompt_tokens"], completion_tokens=result["completion_tokens"],
                              extra=extra)

    def completion(self, model: str, messages: list, *args: Any, model_response: Optional[ModelResponse] = None,
                   optional_params: Optional[dict] = None, **kwargs: Any) -> ModelResponse:
        ctx = s3gym_context(optional_params, kwargs)
        return self._respond(model, self.generate(model, messages, ctx, dict(optional_params or {})), model_response)

    async def acompletion(self, model: str, messages: list, *args: Any, model_response: Optional[ModelResponse] = None,
                          optional_params: Optional[dict] = None, **kwargs: Any) -> ModelResponse:
        ctx = s3gym_context(optional_params, kwargs)
        result = await asyncio.to_thread(self.generate, model, messages, ctx, dict(optional_params or {}))
        return self._respond(model, result, model_response)


def whole_model(path: Path) -> bool:
    """A checkpoint that is a whole model (a full fine-tune) rather than a LoRA adapter."""
    return (Path(path) / "config.json").is_file() and not (Path(path) / "adapter_config.json").is_file()


def _cap(requested: Any, cap: int) -> int:
    return max(1, min(int(requested), cap)) if requested else cap


def _follows_contract(text: str, grammar: Optional[str]) -> bool:
    from s3gym_games.reply import parse_reply

    parsed = parse_reply(text)
    return parsed.action is not None and parsed.self_score is not None and action_is_wellformed(parsed.action, grammar)


HANDLER = TrainedLLM()


def register() -> None:
    """Register the built-in providers with litellm, `trained` among them (it is declared as a plugin in
    s3gym_tui.plugins, so the providers package finds it by name; idempotent)."""
    from s3gym_tui import providers

    providers.register()
