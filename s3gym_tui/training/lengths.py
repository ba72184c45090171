"""Example lengths in the training tokenizer's tokens, and the length limit a training applies.

The limit follows the data: with no --max-length nothing is cut (TRL gets max_length=None), and only
an example longer than the base model's context window is dropped; with --max-length N every example
longer than N is dropped. Either way each dropped example is stored with its reason and token count
and named in the output: TRL never truncates an example in silence (its truncation would cut the
reply off the end and train on nothing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from s3gym_tui.training import require_extra


def load_tokenizer(base: Optional[str] = None, cache: Optional[Path] = None) -> Any:
    """The tokenizer of the training base: a local HF directory, or the embedded model's (read from
    the converted copy when it exists, else straight from the GGUF: no model conversion needed)."""
    require_extra()
    from transformers import AutoTokenizer

    from s3gym_tui.training.backend import DEFAULT_BASE, DEFAULT_BASE_NAME, cache_dir, embedded_gguf, quiet

    with quiet():
        if base in (None, "", DEFAULT_BASE):
            converted = (cache or cache_dir()) / "base" / DEFAULT_BASE_NAME
            if (converted / "tokenizer_config.json").is_file():
                return AutoTokenizer.from_pretrained(converted)
            gguf = embedded_gguf()
            return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        return AutoTokenizer.from_pretrained(Path(base).expanduser())


def context_window(base_dir: Optional[Path]) -> Optional[int]:
    """The base model's max_position_embeddings (None when unknown)."""
    if base_dir is None:
        return None
    try:
        config = json.loads((Path(base_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = config.get("max_position_embeddings") or (config.get("text_config") or {}).get("max_position_embeddings")
    return int(value) if value else None


class TokenCounter:
    """Tokens of a chat example (prompt messages + reply) exactly as TRL's SFT tokenizes it."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, messages: list) -> int:
        ids = self.tokenizer.apply_chat_template(list(messages), tokenize=True, return_dict=False)
        return len(ids)


def effective_limit(max_length: Optional[int], window: Optional[int]) -> Optional[int]:
    """The limit examples are held to: the explicit one, never above the model's window."""
    limits = [v for v in (max_length, window) if v]
    return min(limits) if limits else None
