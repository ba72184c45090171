"""GRPO's rollout replies through TRL's own vLLM generation (`--vllm server|colocate`; needs torch).

TRL 1.16, given a `rollout_func`, only keeps vLLM's weights in sync and calls it: the replies are ours
to generate. When the trainer runs with `use_vllm`, group_rollouts.GroupRollouts samples through this
class instead of sampling.ReplySampler, i.e. through `trainer.vllm_generation` (TRL's VLLMGeneration,
the object TRL itself generates with: same server or colocated engine, same synced weights):

- constrained replies: vLLM's structured outputs with the answer-line regex (TRL's
  `structured_outputs_regex`, set on the generation object for the call only: TRL reads it there at
  every `generate`, in both modes; GRPOConfig's `vllm_structured_outputs_regex` would hold it for ALL
  replies, which the mixed sampling does not want);
- free replies: no regex, cut after the first complete answer line (what sampling.ReplySampler's
  stopping criterion does while generating; a prefix of a sample is a sample of that prefix);
- temperature and max tokens: the sampler's (the GRPO config's), set for the call as well;
- each reply is its own prompt with n = 1 (`num_generations=1`), so TRL's de-duplication of repeated
  prompts in server mode never merges replies of different slots;
- logprobs: the sampled token's logprob from vLLM (TRL asks for `logprobs=0`), which TRL's importance
  sampling correction compares with the trainer's (a reply cut short keeps the logprobs of its tokens).
  Not checked here (no vLLM): whether vLLM's processed logprobs of a constrained reply include the
  grammar's mask. If they do, the sampler's logprob of a constrained token is above the policy's and
  TRL's correction (ratio policy/sampler, clipped) weighs the constrained half down; the transformers
  path has no such correction (its rollouts return no logprobs).

Server mode: TRL's generate is a collective (every rank gathers its prompts to rank 0, which asks the
server, and gets its slice back), so every rank must call it as often and with as many prompts as
the others; the step level makes one call per pattern its sampling uses, even when a rank has no reply
of that kind, and an empty call is skipped only in colocate mode. The episode level calls once per
turn, which differs between ranks: it is refused in server mode across processes (options.py).

This relies on VLLMGeneration's attributes `structured_outputs_regex`, `temperature` and
`max_completion_length` and on `generate(prompts, images, num_generations)` returning (prompt_ids,
completion_ids, logprobs, logprob_token_ids): public names, not a documented hook, so
tests/training/test_vllm_rollouts.py reads TRL's source and fails when they move.
"""

from __future__ import annotations

from typing import Any, Optional

# what is set on TRL's VLLMGeneration for one call and put back afterwards
CALL_FIELDS: tuple[str, ...] = ("structured_outputs_regex", "temperature", "max_completion_length")


def answer_line_end(tokenizer: Any, ids: list[int]) -> int:
    """How many of a free reply's tokens stay: up to the token that completes the answer line (where
    decoding.AnswerLineStop stops a transformers generation), all of them if none does."""
    from s3gym_tui.training.decoding import answer_line_done

    for n in range(1, len(ids) + 1):
        if answer_line_done(tokenizer.decode(ids[:n], skip_special_tokens=True)):
            return n
    return len(ids)


class VllmSampler:
    """ReplySampler's interface (prompt_ids, sample, text, tokenizer, max_new_tokens) over TRL's vLLM
    generation, plus `sample_batch`, which also returns each reply's logprobs."""

    def __init__(self, sampler: Any, generation: Any, mode: str = "colocate") -> None:
        self.base, self.generation, self.mode = sampler, generation, mode
        self.tokenizer = sampler.tokenizer
        self.temperature, self.max_new_tokens = sampler.temperature, sampler.max_new_tokens
        self.calls = 0

    @property
    def collective(self) -> bool:
        """Whether every rank must join each call (TRL's server mode gathers the prompts of all ranks)."""
        return self.mode == "server"

    def prompt_ids(self, messages: list) -> list[int]:
        return self.base.prompt_ids(messages)

    def text(self, ids: list[int]) -> str:
        return self.base.text(ids)

    def sample(self, prompt_ids: list[int], pattern: Any, key: Optional[int] = None) -> list[int]:
        """ReplySampler's interface; `key` is not used (vLLM seeds its own sampling)."""
        return self.sample_batch([prompt_ids], pattern)[0][0]

    def sample_batch(self, prompts: list[list[int]], pattern: Any) -> list[tuple[list[int], list]]:
        """(reply ids, the sampled tokens' logprobs) for each prompt, in one vLLM call; `pattern`: the
        answer line (grammar.AnswerLine: vLLM takes its regex, or a bare regex; None: free)."""
        if not prompts and not self.collective:
            return []
        g = self.generation
        saved = {name: getattr(g, name) for name in CALL_FIELDS}
        g.structured_outputs_regex, g.temperature, g.max_completion_length = (
            getattr(pattern, "regex", pattern), self.temperature, self.max_new_tokens)
        try:
            self.calls += 1
            _, completions, logprobs, _ = g.generate(prompts=[list(p) for p in prompts], images=None,
                                                     num_generations=1)
        finally:
            for name, value in saved.items():
                setattr(g, name, value)
        eos = self.tokenizer.eos_token_id
        out: list[tuple[list[int], list]] = []
        for i, ids in enumerate(completions):
            ids = list(ids)
            # top-1 of each position is the sampled token's (TRL's own reading of vLLM's logprobs)
            lps = [row[0] if isinstance(row, (list, tuple)) else row for row in logprobs[i]] \
                if logprobs is not None else [None] * len(ids)
            if pattern is None:
                keep = answer_line_end(self.tokenizer, ids)
                ids, lps = ids[:keep], lps[:keep]
            if not ids:
                ids, lps = [eos], [None]  # None: TRL leaves a token vLLM did not score uncorrected
            out.append((ids, list(lps)))
        return out


__all__ = ["CALL_FIELDS", "VllmSampler", "answer_line_end"]
