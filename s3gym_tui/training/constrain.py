"""Grammar-constrained generation for transformers (needs torch): the game's own GBNF compiled by
llguidance, applied as a LogitsProcessor that keeps EVERY token the grammar allows next (so a reply
sampled at temperature T is drawn from the policy's distribution restricted to the grammar, not from
a cut of it); the hand-written regex scan (regex_constraint.RegexConstraint, its best-scored KEEP tokens only)
is the fallback when llguidance is not installed or cannot compile a grammar.

Why llguidance (benchmarks/grammar_engines.py on this CPU, bundled SmolLM2-135M): it takes GBNF as the
games write it (its own GBNF-to-Lark converter), computes a whole-vocabulary mask in Rust in well under a
millisecond a token, and is one 3 MB wheel with no dependencies; xgrammar compiles the same grammars as
fast but requires triton (hundreds of MB) on Linux x86_64; outlines brings a stack of its own and takes
regexes or Lark grammars, not GBNF.
"""

from __future__ import annotations

import functools
from typing import Any, Optional, Union

import torch
from transformers import LogitsProcessor

from s3gym_tui.training.grammar import AnswerLine

ENGINE = "llguidance"
FALLBACK = "regex scan"
ENGINES: tuple[str, ...] = ("auto", ENGINE, FALLBACK)


@functools.lru_cache(maxsize=512)
def _compiled(kind: str, text: str) -> str:
    import llguidance

    return llguidance.grammar_from(kind, text)  # type: ignore[arg-type]


def _llg_tokenizer(entry: dict[str, Any]) -> Any:
    """llguidance's view of the entry's tokenizer (built once per loaded model: about half a second)."""
    if entry.get("llg_tokenizer") is None:
        import llguidance.hf

        entry["llg_tokenizer"] = llguidance.hf.from_tokenizer(entry["tokenizer"])
    return entry["llg_tokenizer"]


class GrammarConstraint(LogitsProcessor):
    """One llguidance matcher per batch row, fed the row's new tokens at every step; the logits of the
    tokens its mask forbids become -inf (EOS is allowed once the line is complete)."""

    def __init__(self, matcher: Any, prompt_len: int, eos_id: int) -> None:
        self.template = matcher
        self.prompt_len, self.eos_id = prompt_len, eos_id
        self.matchers: list[Any] = []
        self.fed: list[int] = []

    def _matcher(self, b: int) -> Any:
        while len(self.matchers) <= b:
            self.matchers.append(self.template.deep_copy())
            self.fed.append(0)
        return self.matchers[b]

    def allowed(self, b: int, generated: list[int], vocab: int) -> torch.Tensor:
        """A bool mask over `vocab` of the tokens the grammar allows after `generated`."""
        import numpy as np

        matcher = self._matcher(b)
        if len(generated) > self.fed[b]:
            matcher.consume_tokens(generated[self.fed[b]:])
            self.fed[b] = len(generated)
        mask = torch.zeros(vocab, dtype=torch.bool)
        if matcher.is_error():  # a token the grammar refused (cannot happen under this mask): end the reply
            mask[self.eos_id] = True
            return mask
        bias = np.frombuffer(matcher.compute_logit_bias(), dtype=np.uint8)
        n = min(vocab, bias.shape[0])
        mask[:n] = torch.from_numpy(bias[:n] > 0)
        if not bool(mask.any()):
            mask[self.eos_id] = True
        return mask

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        out = torch.full_like(scores, float("-inf"))
        for b in range(input_ids.shape[0]):
            keep = self.allowed(b, input_ids[b, self.prompt_len:].tolist(), scores.shape[-1]).to(scores.device)
            out[b, keep] = scores[b, keep]
        return out


def _grammar_matcher(entry: dict[str, Any], line: AnswerLine) -> Optional[Any]:
    """An llguidance matcher for the line (its GBNF, else its regex), or None when llguidance is not
    installed or cannot compile it."""
    try:
        import llguidance
    except ImportError:
        return None
    try:
        grammar = _compiled("gbnf", line.gbnf) if line.gbnf else _compiled("regex", line.regex)
        matcher = llguidance.LLMatcher(_llg_tokenizer(entry), grammar, log_level=0)
    except (ValueError, RuntimeError):
        return None
    return None if matcher.is_error() else matcher


def make_constraint(entry: dict[str, Any], line: Union[AnswerLine, str], prompt_len: int, eos_id: int,
                    engine: str = "auto") -> tuple[LogitsProcessor, str]:
    """(the LogitsProcessor constraining a reply to `line`, the engine's name). `entry`: the loaded model's
    dict (model, tokenizer; the engines' caches are kept in it). `line`: an AnswerLine, or a bare regex.
    `engine`: auto (llguidance, else the fallback) | llguidance | regex scan. The count of replies each
    engine constrained is kept in entry["engines"]."""
    if engine not in ENGINES:
        raise ValueError(f"unknown constrained-decoding engine {engine!r}: {', '.join(ENGINES)}")
    if isinstance(line, str):
        line = AnswerLine(line)
    processor: Optional[LogitsProcessor] = None
    used = FALLBACK
    if engine in ("auto", ENGINE):
        matcher = _grammar_matcher(entry, line)
        if matcher is not None:
            processor, used = GrammarConstraint(matcher, prompt_len, eos_id), ENGINE
        elif engine == ENGINE:
            raise ValueError(f"llguidance cannot constrain this reply (not installed, or the grammar does not "
                             f"compile): {(line.gbnf or line.regex)[:120]!r}")
    if processor is None:
        from s3gym_tui.training.regex_constraint import RegexConstraint, first_char_groups, token_pieces

        if entry.get("pieces") is None:
            entry["pieces"] = token_pieces(entry["tokenizer"])
            entry["groups"] = first_char_groups(entry["pieces"])
        processor = RegexConstraint(line.regex, entry["pieces"], entry["groups"], prompt_len, eos_id)
    counts = entry.setdefault("engines", {})
    counts[used] = counts.get(used, 0) + 1
    return processor, used


__all__ = ["ENGINE", "ENGINES", "FALLBACK", "GrammarConstraint", "make_constraint"]
