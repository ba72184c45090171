"""A run fitted to what its model's server says about itself (engine.servers): max tokens and the
history budget fitted to the stated context, with the lines that say so (the CLI prints them, the
app's run dialog shows them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from s3gym_tui.engine.servers import ServerInfo, describe, kind_guess, known, reply_cap

MIN_REPLY_TOKENS = 256  # a fitted reply cap never goes below this (unless the context itself is smaller)
REPLY_SHARE = 4  # a fitted reply takes at most a quarter of the context


@dataclass(frozen=True)
class Fitted:
    max_tokens: int
    history_budget: int
    prompt_tokens: Optional[int]  # the game's first prompt (no history), for the warning
    notes: tuple[str, ...]


def first_prompt_tokens(model: str, game_name: str) -> Optional[int]:
    """Tokens of the game's first prompt without history (litellm's count for the model)."""
    try:
        import s3gym_games as games
        from s3gym_games.prompt import build_messages
        from s3gym_tui.engine.tokens import count_tokens

        game = games.make(game_name, "explore")
        game.reset(0)
        return sum(count_tokens(model, m["content"]) for m in build_messages(game, None, [], ""))
    except Exception:  # noqa: BLE001 - a warning only
        return None


def fit_reply(context: int, max_tokens: int) -> int:
    """The reply cap for a context: at most a quarter of it, at least MIN_REPLY_TOKENS (or half a tiny one)."""
    floor = min(MIN_REPLY_TOKENS, max(1, context // 2))
    return max(1, min(max_tokens, max(floor, context // REPLY_SHARE)))


def fit_to_context(info: ServerInfo, model: str, game: str, pathway: str, max_tokens: int,
                   history_budget: int) -> Fitted:
    """Max tokens and the history budget fitted to the stated context, with a line saying so. An
    unknown context is said, and max tokens kept to a bounded default until the server states it
    or teaches it in an error (engine.llm fits each call then)."""
    from s3gym_tui.engine.experience import effective_budget

    context = info.context
    if not context:
        capped = reply_cap(max_tokens, None) if info.kind != "hosted" else max_tokens
        change = (f": max tokens {max_tokens:,} -> {capped:,} until it states or teaches its context"
                  if capped != max_tokens else "")
        return Fitted(capped, history_budget, None, (info.said() + change,))
    fitted_reply = fit_reply(context, max_tokens)
    budget = effective_budget(model, history_budget, fitted_reply, window=context)
    changes = []
    if fitted_reply != max_tokens:
        changes.append(f"max tokens {max_tokens:,} -> {fitted_reply:,}")
    if budget != history_budget and pathway != "none":
        changes.append(f"history budget {history_budget:,} -> {budget:,}")
    notes = [info.said() + (": " + ", ".join(changes) if changes else ": the run's settings fit")]
    prompt = first_prompt_tokens(model, game)
    if prompt is not None and prompt + fitted_reply > context:
        notes.append(f"the {game} prompt alone is about {prompt:,} tokens: with {fitted_reply:,} for the reply "
                     f"it does not fit {context:,}; serve the model with a larger context")
    return Fitted(fitted_reply, budget if pathway != "none" else history_budget, prompt, tuple(notes))


def fit_config(config: Any, ask: bool = True) -> tuple[Any, tuple[str, ...]]:
    """A RunConfig fitted to what its model's server says (engine.servers.describe): max tokens and
    the history budget fitted to the stated context, the context and the server kind recorded;
    with the lines that say so. Built-in models are left as they are."""
    from s3gym_tui.providers import is_builtin

    base = config.api_base or next(iter(config.api_bases), None)
    if is_builtin(config.model):
        return config, ()
    info = describe(config.model, base) if ask else (known(config.model, base) or ServerInfo(
        kind_guess(config.model, base)))
    fitted = fit_to_context(info, config.model, config.game, config.pathway, config.max_tokens,
                            config.history_budget)
    notes = list(fitted.notes)
    if config.decoding == "grammar":
        from s3gym_tui.engine.decoding import grammar_form

        notes.append(f"decoding: grammar, sent as {grammar_form(info.kind, info.grammar_form)}")
    updated = config.model_copy(update={"max_tokens": fitted.max_tokens, "history_budget": fitted.history_budget,
                                        "context_tokens": info.context or config.context_tokens,
                                        "server_kind": info.kind})
    return updated, tuple(notes)
