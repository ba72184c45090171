"""Token counting for the history budget, with the model's tokenizer where known, cached by text."""

from __future__ import annotations

import hashlib


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).hexdigest()


_CACHE: dict[tuple[str, str], int] = {}


def count_tokens(model: str, text: str) -> int:
    """Tokens of `text` for `model`. Results are cached by (model, text digest), so a finished
    episode's block is counted once however many later prompts include it."""
    key = (model, _digest(text))
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    value = _count(model, text)
    if len(_CACHE) > 200_000:
        _CACHE.clear()
    _CACHE[key] = value
    return value


def _count(model: str, text: str) -> int:
    from s3gym_tui.providers import count_tokens as provider_count

    try:
        return int(provider_count(model, text))
    except Exception:  # a tokenizer litellm would have to download: about four characters a token
        return max(1, (len(text) + 3) // 4) if text else 0
