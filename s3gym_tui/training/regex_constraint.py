"""The hand-written fallback constraint: a regex scan over the vocabulary (constrain.make_constraint uses it
only where llguidance cannot compile a line)."""

from __future__ import annotations

from typing import Any

import regex
import torch
from transformers import LogitsProcessor


def token_pieces(tokenizer: Any) -> list[str]:
    """The text of every token id alone ('' for special tokens, which never enter a constrained line)."""
    size = max(len(tokenizer), getattr(tokenizer, "vocab_size", 0))
    pieces = tokenizer.batch_decode([[i] for i in range(size)], skip_special_tokens=False,
                                    clean_up_tokenization_spaces=False)
    for i in tokenizer.all_special_ids:
        if 0 <= i < size:
            pieces[i] = ""
    return pieces


def first_char_groups(pieces: list[str]) -> dict[str, torch.Tensor]:
    """Token ids grouped by the first character of their text (special tokens left out)."""
    groups: dict[str, list[int]] = {}
    for token, piece in enumerate(pieces):
        if piece:
            groups.setdefault(piece[0], []).append(token)
    return {c: torch.tensor(ids, dtype=torch.long) for c, ids in groups.items()}


class RegexConstraint(LogitsProcessor):
    """The fallback constraint (constrain.make_constraint uses it only where llguidance cannot): only
    tokens that keep the generated text a prefix of a full match survive; EOS only once the
    text fully matches. The next characters the pattern allows are found first (one partial match per
    distinct first character of the vocabulary), then only tokens starting with one of them are
    checked, best-scored first, until KEEP of them are found (sampling is then among those: a cut of
    the allowed distribution, which is why it is not the default)."""

    KEEP = 8

    def __init__(self, pattern: str, pieces: list[str], groups: dict[str, torch.Tensor], prompt_len: int,
                 eos_id: int) -> None:
        self.pattern = regex.compile(pattern)
        self.pieces = pieces
        self.groups = groups
        self.prompt_len = prompt_len
        self.eos_id = eos_id

    def allowed(self, text: str, row: torch.Tensor) -> list[int]:
        row = row.detach().float().cpu()  # the token groups live on the CPU
        allowed: list[int] = [self.eos_id] if self.pattern.fullmatch(text) is not None else []
        starts = [ids for c, ids in self.groups.items() if self.pattern.fullmatch(text + c, partial=True)]
        if starts:
            ids = torch.cat(starts)
            found = 0
            for token in ids[torch.argsort(row[ids], descending=True)].tolist():
                if self.pattern.fullmatch(text + self.pieces[token], partial=True):
                    allowed.append(token)
                    found += 1
                    if found >= self.KEEP:
                        break
        return allowed or [self.eos_id]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        out = torch.full_like(scores, float("-inf"))
        for b in range(input_ids.shape[0]):
            text = "".join(self.pieces[t] for t in input_ids[b, self.prompt_len:].tolist())
            keep = torch.tensor(self.allowed(text, scores[b]), device=scores.device)
            out[b, keep] = scores[b, keep]
        return out
