"""Finding moments: the store's search plus what needs the engine (the first divergences of Compare
pairs) and the episode a found step is best compared with. Used by `s3gym search` and the app's
Search screen alike."""

from __future__ import annotations

from typing import Optional

import s3gym_games as games
from s3gym_tui.engine.compare import best_pairs, same_action
from s3gym_tui.models import Episode
from s3gym_tui.store.search import DEFAULT_LIMIT, SearchFilters, SearchResult
from s3gym_tui.engine.pathways import IN_CONTEXT


def compare_pairs(store, game: Optional[str] = None) -> list[tuple[str, str]]:
    """The pairs Compare shows: History vs Summary evaluation episodes (the Pairs screen's) and every
    fork with its source."""
    pairs = [(p.history_episode, p.summary_episode) for p in best_pairs(store, limit=None, game=game)]
    return pairs + store.search.fork_pairs(game)


def first_action_divergence(a: list[str], b: list[str], game: Optional[str] = None) -> Optional[int]:
    """engine.compare.first_divergence over two lists of actions (the same rule: same_action)."""
    for i in range(max(len(a), len(b))):
        if not same_action(a[i] if i < len(a) else None, b[i] if i < len(b) else None, game):
            return i
    return None


def divergence_steps(store, filters: SearchFilters) -> set[tuple[str, int]]:
    """(episode, step index) of the first divergence of every Compare pair, on both sides."""
    pairs = [(a, b, g) for g in (filters.games or games.names()) for a, b in compare_pairs(store, g)]
    actions = store.search.episode_actions(sorted({e for a, b, _ in pairs for e in (a, b)}))
    found: set[tuple[str, int]] = set()
    for a, b, game in pairs:  # each pair by its game's rule of the same move
        k = first_action_divergence(actions[a], actions[b], game)
        if k is None:
            continue
        for episode_id in (a, b):
            if k < len(actions[episode_id]):
                found.add((episode_id, k))
    return found


def find(store, query: str = "", filters: Optional[SearchFilters] = None, *,
         limit: int = DEFAULT_LIMIT) -> SearchResult:
    """store.search, with the divergence filter's steps computed when it is asked for."""
    filters = filters or SearchFilters()
    divergences = divergence_steps(store, filters) if filters.divergences else None
    return store.search.find(query, filters, limit=limit, divergences=divergences)


def compare_partner(store, episode: Episode) -> Optional[str]:
    """The episode a found step is best compared with: the fork's source, the other side of its
    History/Summary pair, else another episode of the same game and seed (None when there is none)."""
    if episode.fork_of:
        return episode.fork_of
    if episode.phase == "eval" and episode.pathway in IN_CONTEXT:
        for pair in best_pairs(store, limit=None, game=episode.game):
            if episode.id == pair.history_episode:
                return pair.summary_episode
            if episode.id == pair.summary_episode:
                return pair.history_episode
    return store.search.same_seed_episode(episode.id)


# ----- one line of words and filters (the app's Search box) -----------------------------------------
_KEYS = {"game": "games", "run": "runs", "sweep": "sweeps", "model": "models", "pathway": "pathways",
         "phase": "phases", "verdict": "verdicts", "actor": "actors", "fault": "faults", "label": "labels",
         "in": "fields"}
_RANGES = {"self>=": "self_min", "self<=": "self_max", "reward>=": "reward_min", "reward<=": "reward_max"}
SYNTAX = ("words; \"a phrase\"; word*; -word; game: run: sweep: model: pathway: phase: verdict: actor: fault: "
          "label: in: (repeat for OR); self>=N self<=N reward>=N reward<=N; forks:yes|no; divergences:yes")


def parse_search_line(line: str) -> tuple[str, SearchFilters]:
    """`grudge game:trust verdict:over self>=1` -> ("grudge", filters). ValueError names the bad part."""
    import shlex

    try:
        parts = shlex.split(line or "", posix=True)
    except ValueError:
        parts = (line or "").split()
    words: list[str] = []
    values: dict[str, list] = {}
    scalars: dict[str, object] = {}
    for part in parts:
        range_key = next((k for k in _RANGES if part.startswith(k)), None)
        if range_key:
            try:
                scalars[_RANGES[range_key]] = float(part[len(range_key):])
            except ValueError:
                raise ValueError(f"{part!r}: {range_key} needs a number") from None
            continue
        key, sep, value = part.partition(":")
        if sep and key in _KEYS and value:
            values.setdefault(_KEYS[key], []).append(value)
        elif sep and key == "forks" and value in ("yes", "no"):
            scalars["forks"] = value == "yes"
        elif sep and key == "divergences" and value == "yes":
            scalars["divergences"] = True
        else:
            words.append(f'"{part}"' if " " in part else part)
    try:
        filters = SearchFilters(**{k: tuple(v) for k, v in values.items()}, **scalars)
    except ValueError as err:
        first = getattr(err, "errors", lambda: [{"msg": str(err)}])()[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if not isinstance(p, int))
        message = str(first.get("msg", "")).removeprefix("Value error, ")
        raise ValueError(f"{where}: {message}" if where else message) from None
    return " ".join(words), filters
