"""How GRPO samples the policy's replies (needs torch): free, or constrained to the game's answer line.

Why (measured on the bundled SmolLM2-135M, trust, explore seed 5, temperature 1): 1 of 6 free replies
had a parsable `Answer:` line, the rest were prose; every reply of a group then earned the same reward
(zero variance, no learning signal). Constrained replies (`Answer: <action>, Score: <n>` under the
game's action grammar: constrain.py, llguidance) always parse, so a group differs by its actions; but
they alone cannot teach the free format the strict evaluation reads: the tokens every constrained reply
shares ("Answer: ") get advantages summing to zero in each group. So the default is `mixed`: half of
every group (the first ceil(G/2)) is sampled under the constraint and half free, and the reward carries
a format term (`format_weight` per reply without an action), so parsed replies beat prose within the
group and the free policy is pushed towards the answer line. `free` and `constrained` stay available
(recorded on the training as `grpo.sampling`).
"""

from __future__ import annotations

from typing import Any, Optional

SAMPLINGS: tuple[str, ...] = ("mixed", "constrained", "free")


def constrained_slot(sampling: str, k: int, group: int) -> bool:
    """Whether the k-th reply (0-based) of a group of `group` is sampled under the answer-line grammar."""
    if sampling == "constrained":
        return True
    if sampling == "free":
        return False
    if sampling == "mixed":
        return k < (group + 1) // 2
    raise ValueError(f"unknown sampling {sampling!r}: {', '.join(SAMPLINGS)}")


class ReplySampler:
    """Samples one reply (as token ids, ending with EOS when the model ended it) from the policy,
    free (stopping after the answer line) or under the answer-line constraint; a random stream of its
    own (forked), so TRL's sampling is left untouched."""

    def __init__(self, model: Any, tokenizer: Any, temperature: float, max_new_tokens: int, seed: int = 0,
                 top_p: float = 1.0) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.max_new_tokens, self.seed, self.top_p = temperature, max_new_tokens, seed, top_p
        self.entry: dict[str, Any] = {"model": model, "tokenizer": tokenizer, "pieces": None}
        self.calls = 0  # draws seeded by their count (the rollout player)
        self.drawn = 0  # every reply drawn here
        self._prefixes: dict[tuple, Any] = {}  # prompt (all but its last token) -> its KV cache, this batch only

    def forget_prefixes(self) -> None:
        """A new batch (the weights may have moved since): the prompt caches made before are stale."""
        self._prefixes.clear()

    def _prefix(self, prompt: Any) -> Any:
        """A copy of the KV cache of all but the last prompt token, computed once per prompt and batch: the G
        replies of a group share their prompt, so its prefill is done once, not G times."""
        import copy

        import torch
        from transformers import DynamicCache

        key = tuple(prompt[0, :-1].tolist())
        if key not in self._prefixes:
            if len(self._prefixes) >= 16:
                self._prefixes.clear()
            with torch.inference_mode():
                try:
                    out = self.model(input_ids=prompt[:, :-1], cache=DynamicCache(), use_cache=True, logits_to_keep=1)
                except TypeError:  # a model without logits_to_keep
                    out = self.model(input_ids=prompt[:, :-1], cache=DynamicCache(), use_cache=True)
            self._prefixes[key] = out.cache
        return copy.deepcopy(self._prefixes[key])

    def prompt_ids(self, messages: list) -> list[int]:
        return list(self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False))

    def _seed(self, key: Optional[int]) -> int:
        """The sampling seed: from `key` (a rollout's place: the same after a resume) or, without
        one, from the call count (the rollout player, whose calls a resume replays); odd and even
        seeds keep the two streams apart."""
        if key is not None:
            return (self.seed * 1_000_003 + key) * 2 + 1
        self.calls += 1
        return (self.seed * 100_003 + self.calls) * 2

    @property
    def engines(self) -> dict[str, int]:
        """Constrained replies drawn by each engine (constrain.py: llguidance, or the fallback)."""
        return dict(self.entry.get("engines") or {})

    def sample(self, prompt_ids: list[int], pattern: Any, key: Optional[int] = None) -> list[int]:
        """Reply token ids for `prompt_ids`; `pattern`: the answer line (grammar.AnswerLine, or a bare
        regex) it is constrained to, None: free."""
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        from s3gym_tui.training.constrain import make_constraint
        from s3gym_tui.training.decoding import AnswerLineStop

        seed = self._seed(key)
        self.drawn += 1
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        device = getattr(self.model, "device", "cpu")
        prompt = torch.tensor([prompt_ids], dtype=torch.long, device=device)
        kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "pad_token_id": pad, "eos_token_id": eos}
        if self.temperature > 0:
            kwargs.update(do_sample=True, temperature=self.temperature, top_k=0, top_p=self.top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_k=None, top_p=None)
        if pattern is not None:
            constraint, _ = make_constraint(self.entry, pattern, prompt.shape[1], eos)
            kwargs["logits_processor"] = LogitsProcessorList([constraint])
        else:
            kwargs["stopping_criteria"] = StoppingCriteriaList([AnswerLineStop(self.tokenizer, prompt.shape[1])])
        training = self.model.training
        self.model.eval()
        try:
            if key is not None and prompt.shape[1] > 1:  # a group's reply (the player's prompts differ every time)
                kwargs["cache"] = self._prefix(prompt)
            with torch.random.fork_rng(), torch.inference_mode():
                torch.manual_seed(seed)
                out = self.model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), **kwargs)
        finally:
            if training:
                self.model.train()
        new = out[0, prompt.shape[1]:].tolist()
        while len(new) > 1 and new[-1] == pad and new[-2] in (pad, eos):
            new = new[:-1]  # padding after the end (a batch of one has none, kept for safety)
        if pad != eos and new and new[-1] == pad:
            new[-1] = eos
        return new or [eos]

    def text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip()
