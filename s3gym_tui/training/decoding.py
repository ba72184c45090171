"""Generation for the `trained` provider (needs torch): free replies that stop after the answer line,
and replies constrained to the answer contract (constrain.py: the game's GBNF through llguidance; the
regex scan of regex_constraint.py is its fallback)."""

from __future__ import annotations

import copy
import re
from typing import Any

import torch
from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from s3gym_tui.training.constrain import make_constraint

# a complete contract line followed by a line break: nothing after it can change the parse much
_ANSWER_DONE = re.compile(r"answer\s*:[^\n]*score\s*[:=]\s*[-+]?\d+(?:\.\d+)?[^\n]*\n", re.IGNORECASE)


def answer_line_done(text: str) -> bool:
    """Whether a free reply's text holds a complete answer line (what AnswerLineStop stops at)."""
    return _ANSWER_DONE.search(text) is not None


class AnswerLineStop(StoppingCriteria):
    """Stop a free reply once it holds a complete `Answer: ..., Score: n` line."""

    def __init__(self, tokenizer: Any, prompt_len: int) -> None:
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
        done = [bool(_ANSWER_DONE.search(self.tokenizer.decode(row[self.prompt_len:], skip_special_tokens=True)))
                for row in input_ids]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class Generator:
    """Generation with one loaded model entry (see serve.TrainedLLM); greedy unless temperature > 0."""

    def __init__(self, entry: dict[str, Any], temperature: float = 0.0, seed: int = 0) -> None:
        self.entry = entry
        self.model = entry["model"]
        self.tokenizer = entry["tokenizer"]
        self.temperature = temperature
        self.seed = seed
        self._cache: Any = None

    def prompt_ids(self, chat: list[dict]) -> torch.Tensor:
        ids = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_dict=False)
        self._cache = None
        return torch.tensor([list(ids)], dtype=torch.long, device=self.model.device)

    def _prompt_cache(self, prompt: torch.Tensor) -> Any:
        """A copy of the KV cache of all but the last prompt token: a repair reuses the free
        attempt's prefill instead of computing it again."""
        if self._cache is None:
            from transformers import DynamicCache

            with torch.inference_mode():
                self._cache = self.model(input_ids=prompt[:, :-1], cache=DynamicCache(),
                                         use_cache=True).cache
        return copy.deepcopy(self._cache)

    def _run(self, prompt: torch.Tensor, max_new: int, **extra: Any) -> tuple[list[int], int]:
        eos = self.tokenizer.eos_token_id
        kwargs: dict[str, Any] = {"max_new_tokens": max_new, "pad_token_id": self.tokenizer.pad_token_id or eos,
                                  "eos_token_id": eos}
        if self.temperature > 0:
            torch.manual_seed(self.seed)
            kwargs.update(do_sample=True, temperature=self.temperature, top_k=0, top_p=1.0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_k=None, top_p=None)
        if prompt.shape[1] > 1:
            kwargs["cache"] = self._prompt_cache(prompt)
        with torch.inference_mode():
            out = self.model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), **kwargs, **extra)
        new = out[0, prompt.shape[1]:].tolist()
        count = len(new)
        while new and new[-1] in (eos, kwargs["pad_token_id"]):
            new = new[:-1]
        return new, count

    def free(self, prompt: torch.Tensor, max_new: int, stop_after_answer: bool = False) -> tuple[str, int]:
        extra = {}
        if stop_after_answer:
            extra["stopping_criteria"] = StoppingCriteriaList([AnswerLineStop(self.tokenizer, prompt.shape[1])])
        ids, count = self._run(prompt, max_new, **extra)
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip(), count

    def constrained(self, prompt: torch.Tensor, line: Any, max_new: int) -> tuple[str, int]:
        """A reply constrained to `line` (grammar.AnswerLine, or a bare regex) from its first token."""
        constraint, _ = make_constraint(self.entry, line, prompt.shape[1], self.tokenizer.eos_token_id)
        ids, count = self._run(prompt, max_new, logits_processor=LogitsProcessorList([constraint]))
        return self.tokenizer.decode(ids, skip_special_tokens=True), count
