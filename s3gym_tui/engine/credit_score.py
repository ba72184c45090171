"""Token log-probabilities of a given completion, with and without privileged information (TASPO's
shift Delta_itk = log p(token | context + P) - log p(token | context)).

Only a model whose weights we hold can score text it did not write: a local Hugging Face model
(transformers; a directory, or `hf:<dir>`) or the embedded model (`local/smollm2-135m`, llama.cpp
with every position's logits kept). Any other provider (an API, the scripted policies) cannot: the
caller says so in one line and scores with a chosen open model instead (`--scorer`), recorded with the
credit. torch and llama_cpp are imported only when a scorer is built.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any, Optional, Protocol, Sequence

DEFAULT_OPEN_SCORER = "local/smollm2-135m"
EMBEDDED = "local/smollm2-135m"


class CannotScore(ValueError):
    """This model cannot score a given completion (one-line message)."""


class Scorer(Protocol):
    name: str

    def logprobs(self, messages: Sequence[dict], completion: str) -> list[float]:
        """log p(token_k | messages, completion[:k]) for each token of the completion."""


def hf_dir(model: str) -> Optional[Path]:
    """The Hugging Face model directory `model` names (`hf:<dir>` or a directory with config.json)."""
    path = Path(model[3:] if model.startswith("hf:") else model).expanduser()
    return path if (path / "config.json").is_file() else None


def can_score(model: str) -> bool:
    return model == EMBEDDED or hf_dir(model) is not None


def cannot_score_message(model: str) -> str:
    return (f"{model} cannot score a given completion (its provider returns no log-probabilities of text "
            f"it did not write)")


def scorer_for(model: str) -> Scorer:
    """A scorer for `model`, or CannotScore."""
    if model == EMBEDDED:
        return LlamaScorer()
    path = hf_dir(model)
    if path is not None:
        return HFScorer.load(path, name=model)
    raise CannotScore(cannot_score_message(model))


def _log_softmax_at(row: Any, token: int) -> float:
    """log softmax(row)[token] for one row of logits (a numpy vector)."""
    import numpy as np

    row = np.asarray(row, dtype=np.float64)
    top = row.max()
    return float(row[token] - top - math.log(np.exp(row - top).sum()))


class HFScorer:
    """transformers: one forward pass over prompt + completion, log-softmax at the completion's positions.
    Also used in training with the frozen old policy's model object (adapter as it was at rollout)."""

    def __init__(self, model: Any, tokenizer: Any, name: str = "hf") -> None:
        self.model, self.tokenizer, self.name = model, tokenizer, name

    @classmethod
    def load(cls, path: Path, name: str) -> "HFScorer":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path)
        model.eval()
        return cls(model, tokenizer, name)

    def prompt_ids(self, messages: Sequence[dict]) -> list[int]:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            return list(ids)
        text = "".join(f"{m.get('role')}: {m.get('content')}\n" for m in messages) + "assistant: "
        return list(tok(text, add_special_tokens=False).input_ids)

    def logprobs(self, messages: Sequence[dict], completion: str) -> list[float]:
        import torch

        comp = list(self.tokenizer(completion, add_special_tokens=False).input_ids)
        if not comp:
            return []
        prompt = self.prompt_ids(messages)
        limit = int(getattr(self.model.config, "max_position_embeddings", 0) or 0)
        if limit and len(prompt) + len(comp) > limit:  # keep the end of the prompt (the hint is there)
            prompt = prompt[len(prompt) + len(comp) - limit:]
        ids = torch.tensor([prompt + comp], device=self.model.device)
        with torch.no_grad():
            logits = self.model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(1, torch.tensor(comp, device=logp.device)[:, None])[:, 0].tolist()


class LlamaScorer:
    """The embedded model through llama.cpp, its own instance (the generating one is busy with games):
    the prompt is evaluated once, then the completion token by token, reading the next-token logits
    after each (llama_get_logits; `logits_all` would keep n_ctx x vocab floats, 1.6 GB at 8k). The KV
    state of the prefix shared with the previous call (the same prompt with and without the hint) is
    kept, as llama.cpp's own generate does."""

    name = EMBEDDED
    _shared: Optional[Any] = None
    _lock = threading.Lock()

    def __init__(self, n_ctx: int = 8192) -> None:
        self.n_ctx = n_ctx

    def _llm(self) -> Any:
        if LlamaScorer._shared is None:
            from s3gym_tui.providers.local import MODEL_NAME, PROVIDER, _import_backend, model_file
            from s3gym_tui.threads import cpu_threads

            try:
                llama_cpp, package = _import_backend(f"{PROVIDER}/{MODEL_NAME}")
                path = model_file(package)
            except Exception as exc:  # noqa: BLE001 - one line for the person
                raise CannotScore(f"{EMBEDDED} cannot score here: {exc}") from None
            LlamaScorer._shared = llama_cpp.Llama(model_path=str(path), n_ctx=self.n_ctx, n_threads=cpu_threads(2),
                                                  n_threads_batch=cpu_threads(), seed=0, verbose=False)
        return LlamaScorer._shared

    @staticmethod
    def chat_text(messages: Sequence[dict]) -> str:
        """SmolLM2's chat format (ChatML), ending where the assistant's reply starts."""
        parts = [f"<|im_start|>{m.get('role', 'user')}\n{m.get('content') or ''}<|im_end|>\n" for m in messages]
        return "".join(parts) + "<|im_start|>assistant\n"

    def logprobs(self, messages: Sequence[dict], completion: str) -> list[float]:
        import llama_cpp
        import numpy as np

        with LlamaScorer._lock:
            llm = self._llm()
            comp = llm.tokenize(completion.encode("utf-8"), add_bos=False, special=False)
            if not comp:
                return []
            prompt = llm.tokenize(self.chat_text(messages).encode("utf-8"), add_bos=False, special=True)
            room = self.n_ctx - len(comp) - 1
            if len(prompt) > room:  # keep the end of the prompt (the hint is there)
                prompt = prompt[len(prompt) - room:]
            kept = 0
            for old, new in zip(llm.input_ids[:llm.n_tokens].tolist(), prompt[:-1]):
                if old != new:
                    break
                kept += 1
            llm.n_tokens = kept  # eval() drops the KV state past n_tokens
            n_vocab = llm.n_vocab()
            out = []
            todo = prompt[kept:]
            for tok in comp:
                llm.eval(todo)
                row = np.ctypeslib.as_array(llama_cpp.llama_get_logits(llm.ctx), shape=(n_vocab,))
                out.append(_log_softmax_at(row, tok))
                todo = [tok]
            return out


def shifts(scorer: Scorer, messages: Sequence[dict], hinted: Sequence[dict], completion: str) -> list[float]:
    """Delta per completion token: log p with the hint minus log p without it."""
    plain = scorer.logprobs(messages, completion)
    with_hint = scorer.logprobs(hinted, completion)
    return [a - b for a, b in zip(with_hint, plain)]
