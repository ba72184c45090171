"""The learner's one mechanism: read experience from the prompt, choose by it, say why; and write summaries.

Act: the experience in the prompt (History's raw episodes, or a summary's rules) becomes one evidence table;
for every option the finest situation description with evidence decides its value (an exact match, else a
near one, each pulled towards the coarser ones); the best value wins, an option never seen is taken to be
worth what a typical option is (so known-bad options lose to unknown ones and known-good ones beat them), and
ties fall to a hash of the step's own text (the prior: a legal move, the same whatever the experience). The reply names the situation, the evidence used and where it was seen, then the
`Answer: ..., Score: ...` line; the score is the mean judged reward of that evidence.

Summarise: the old summary's rules plus the episodes it does not cover yet, merged, then compressed: rules
seen once are dropped, the rest ranked by how often they were seen times what they add to their coarser rule,
and at most RULES_PER_SECTION kept per section. That cut is where Summary loses what History keeps.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Optional

from s3gym_tui.providers.learner.evidence import (OTHER, Evidence, Item, Rule, Stat, covers_line, evidence_from_rules,
                                                   parse_rules, rules_of)
from s3gym_tui.providers.learner.prompt import ActPrompt, Episode, SummaryPrompt, parse_history
from s3gym_tui.providers.learner.readers.base import Decision, Option, Reader

RULES_PER_SECTION = 12  # a summary a person can read; the lossy part of Summary Memory
MIN_SUPPORT = 2  # a rule seen once is not written into a summary
UNSEEN = 99  # the level of an option without evidence
SHRINK = 3.0  # how many observations' weight a coarser description lends a finer one


@dataclass(frozen=True)
class Choice:
    decision: Decision
    option: Option
    value: float
    level: Optional[int]  # which of the option's descriptions matched (0: exact); None: no evidence
    key: Optional[str]
    stat: Optional[Stat]
    total: float
    expected_reward: float


@dataclass(frozen=True)
class Experience:
    evidence: Evidence
    kind: str  # "history", "summary" or "none"
    episodes: int  # previous episodes read (History)
    rules: int  # rules read (Summary)


# ----- experience ----------------------------------------------------------------------------------------
def episode_items(reader: Reader, episode: Episode) -> list[Item]:
    """The pieces of experience of one remembered episode. The option taken at a step is worth its judged
    utility plus the discounted worth of the steps after it (`reader.discount`: what a move led to)."""
    turns = episode.turns
    taken: list[Optional[Item]] = []
    other: list[Item] = []
    for i, turn in enumerate(turns):
        _, before = reader.split_env(turn.env)
        feedback, after = reader.split_env(turns[i + 1].env) if i + 1 < len(turns) else ("", None)
        ref = f"Previous episode {episode.number}, step {i + 1}"
        main, more = reader.experience(before, turn.action, feedback, after, turn.self_score,
                                       turn.oracle_reward, ref)
        taken.append(main)
        other += more
    if reader.discount:
        later = 0.0
        for i in range(len(taken) - 1, -1, -1):
            item = taken[i]
            if item is None:
                later = 0.0
                continue
            worth = item.utility + reader.discount * later
            taken[i] = replace(item, utility=worth)
            later = worth
    return [item for item in taken if item is not None] + other


def history_evidence(reader: Reader, episodes) -> Evidence:
    evidence = Evidence()
    for episode in episodes:
        for item in episode_items(reader, episode):
            evidence.add(item)
        evidence.episodes.add(episode.number)
    return evidence


_CACHE: "OrderedDict[tuple[str, str], Experience]" = OrderedDict()  # (game, hint text) -> its evidence
_CACHE_SIZE = 64


def experience(reader: Reader, hint: Optional[str]) -> Experience:
    """The evidence a Hint Messages block holds. Memoised on the text (a pure function of it: the same
    block, the same table; within an episode every step carries the same block)."""
    if not hint:
        return Experience(Evidence(), "none", 0, 0)
    key = (reader.game, hint)
    found = _CACHE.get(key)
    if found is not None:
        _CACHE.move_to_end(key)
        return found
    episodes = parse_history(hint)
    evidence = history_evidence(reader, episodes)
    rules, _ = parse_rules(hint)
    if rules:
        evidence.merge(evidence_from_rules(rules))
    kind = "history" if episodes else ("summary" if rules else "none")
    if not episodes and not rules:
        kind = "summary"  # a summary with no rule the learner can use: it has nothing to go by
    found = Experience(evidence, kind, len(episodes), len(rules))
    _CACHE[key] = found
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return found


# ----- choosing --------------------------------------------------------------------------------------
def _tiebreak(prefix: "hashlib._Hash", label: str) -> int:
    """A tie's order: the hash of the step's text, a NUL and the option's action (`prefix` has hashed the
    first two once: the digest is the one of the whole text, without hashing a long board again per option)."""
    hasher = prefix.copy()
    hasher.update(label.encode("utf-8", "replace"))
    return int.from_bytes(hasher.digest(), "big")


def baseline(decision: Decision, evidence: Evidence) -> float:
    """What a typical option of this decision is worth: the mean utility over the evidence of the coarsest
    descriptions of its options (0 without any). An option never seen is taken to be typical."""
    n = total = 0.0
    for key in {option.keys[-1] for option in decision.options if option.keys}:
        for stat in evidence.table.get(key, {}).values():
            n += stat.n
            total += stat.utility
    return total / n if n else 0.0


def _value(reader: Reader, decision: Decision, option: Option, evidence: Evidence, typical: float) -> Choice:
    """The option's worth: from the coarsest description with evidence to the finest, each estimate is
    pulled towards the coarser one (the typical worth above the coarsest) by SHRINK observations' weight, so
    a near match informs an exact one seen rarely; the finest description with evidence is the one cited."""
    value, reward = typical, reader.prior_reward
    found: Optional[tuple[int, str, Stat]] = None
    seen: set[str] = set()
    for depth in range(len(option.keys) - 1, -1, -1):
        key = option.keys[depth]
        stat = evidence.table.get(key, {}).get(option.label)
        if key in seen or stat is None or stat.n <= 0:
            continue
        seen.add(key)
        value = (stat.utility + SHRINK * value) / (stat.n + SHRINK)
        reward = (stat.reward + SHRINK * reward) / (stat.n + SHRINK)
        found = (option.keys.index(key), key, stat)
    if found is None:
        return Choice(decision, option, typical, None, None, None, 0.0, reader.prior_reward)
    depth, key, stat = found
    return Choice(decision, option, value, depth, key, stat, stat.n, reward)


def _predict(decision: Decision, evidence: Evidence) -> Choice:
    """A predictive decision: the most frequent outcome of the finest situation seen."""
    make = decision.make or (lambda label: label)
    for depth, key in enumerate(decision.keys):
        outcomes = evidence.table.get(key)
        if not outcomes:
            continue
        total = sum(s.n for s in outcomes.values())
        named = [(label, s) for label, s in outcomes.items() if label != OTHER and s.n > 0]
        if not named or total <= 0:
            continue
        label, stat = max(named, key=lambda ls: (ls[1].n, ls[0]))
        share = stat.n / total
        option = Option(label, decision.keys, make(label))
        return Choice(decision, option, share, depth, key, stat, total, share * decision.weight)
    option = Option(decision.prior, decision.keys, make(decision.prior))
    return Choice(decision, option, 0.0, None, None, None, 0.0, 0.0)


def choose(reader: Reader, decision: Decision, evidence: Evidence, step_text: str) -> Choice:
    if reader.predictive:
        return _predict(decision, evidence)
    typical = baseline(decision, evidence)
    worth: dict[tuple[str, tuple[str, ...]], Choice] = {}  # options described alike are worth alike
    values = []
    for option in decision.options:
        same = worth.get((option.label, option.keys))
        if same is None:
            same = worth[(option.label, option.keys)] = _value(reader, decision, option, evidence, typical)
            values.append(same)
        else:
            values.append(replace(same, option=option))

    def rank(c: Choice) -> tuple:
        return round(c.value, 9), -(c.level if c.level is not None else UNSEEN), c.total

    best = max(map(rank, values))
    tied = [c for c in values if rank(c) == best]
    if len(tied) == 1:
        return tied[0]
    prefix = hashlib.blake2b(f"{step_text}\0".encode("utf-8", "replace"), digest_size=8)
    return max(tied, key=lambda c: _tiebreak(prefix, c.option.action))


# ----- the reply -------------------------------------------------------------------------------------
def _rule_text(choice: Choice, predictive: bool) -> str:
    stat = choice.stat
    rule = Rule(choice.key or "", choice.option.label, stat.n if stat else 0, stat.mean_reward if stat else 0,
                stat.mean_utility if stat else 0, choice.total, predictive)
    return rule.text()


def _evidence_line(choice: Choice, kind: str, predictive: bool) -> str:
    if choice.level is None:
        return "no evidence for this situation; prior choice"
    near = "exact match" if choice.level == 0 else f"near match (level {choice.level + 1})"
    rule = _rule_text(choice, predictive)
    if kind == "history" and choice.stat and choice.stat.refs:
        return f"{near}, History {rule}; seen at {'; '.join(choice.stat.refs)}"
    source = "summary rule" if kind == "summary" else kind
    return f"{near}, {source} {rule}"


def act(reader: Reader, prompt: ActPrompt) -> tuple[str, str, float]:
    """(reply text, action, self-score) for one action request."""
    exp = experience(reader, prompt.hint)
    decisions = [d for d in reader.decisions(prompt.observation) if d.options or reader.predictive]
    if not decisions:
        return "Nothing to decide in this state.\nAnswer: END, Score: 0", "END", 0.0
    choices = [choose(reader, d, exp.evidence, prompt.step_text) for d in decisions]
    action = reader.compose([(c.decision, c.option.action) for c in choices])
    score = round(sum(c.expected_reward for c in choices), 4) + 0.0
    lines = [f"Experience: {_describe(exp)}."]
    if len(choices) == 1:
        c = choices[0]
        lines.append(f"Situation: [{c.option.keys[0] if c.option.keys else ''}]")
        lines.append(f"Evidence: {_evidence_line(c, exp.kind, reader.predictive)}")
    else:
        matched = [c for c in choices if c.level is not None]
        exact = sum(1 for c in matched if c.level == 0)
        lines.append(f"Matched {len(matched)} of {len(choices)} ({exact} exact, {len(matched) - exact} near); "
                     f"{len(choices) - len(matched)} by the prior.")
        for c in matched:  # every one: the decision that makes two runs part may be any of them
            lines.append(f"{c.decision.name}: {_evidence_line(c, exp.kind, reader.predictive)}")
    lines.append(f"Answer: {action}, Score: {score:g}")
    return "\n".join(lines), action, score


def _describe(exp: Experience) -> str:
    if exp.kind == "history":
        return f"History of {exp.episodes} previous episode(s), {len(exp.evidence)} situation-option pairs"
    if exp.kind == "summary":
        return f"a summary of {exp.rules} rule(s)"
    return "none"


# ----- summarising -----------------------------------------------------------------------------------
def _gain(rule: Rule, evidence: Evidence, by_key: dict[tuple[str, str], Rule]) -> float:
    """What a rule adds to its coarser rule (the same option one level up; the baseline 0 at the top)."""
    parent = evidence.parent.get(rule.key)
    coarse = by_key.get((parent, rule.option)) if parent is not None else None
    return abs(rule.value - (coarse.value if coarse is not None else 0.0))


def _importance(rule: Rule, evidence: Evidence, by_key: dict[tuple[str, str], Rule]) -> float:
    """How much the rule matters: how often it was seen times what it says beyond its coarser rule."""
    return rule.n * (_gain(rule, evidence, by_key) + 0.05)


def summarise(reader: Reader, prompt: SummaryPrompt, complete: bool = False) -> str:
    """The three-part summary text. `complete`: every rule with its counts, nothing dropped (what the
    information-recovery check gives the learner: a summary that loses nothing History had)."""
    old_rules, covered = parse_rules(prompt.summary or "")
    evidence = evidence_from_rules(old_rules)
    new = [e for e in parse_history(prompt.history) if e.number not in covered]
    evidence.merge(history_evidence(reader, new))
    episodes = covered | {e.number for e in new}
    rules = rules_of(evidence, reader.predictive)
    by_key = {(r.key, r.option): r for r in rules}
    def rank(r: Rule):
        return (-_importance(r, evidence, by_key), r.key, r.option)

    if complete:
        kept = sorted(rules, key=rank)
        good, bad = [r for r in kept if r.value >= 0], [r for r in kept if r.value < 0]
        dropped = 0
    else:
        useful = sorted((r for r in rules if r.n >= MIN_SUPPORT), key=rank)
        good = [r for r in useful if r.value >= 0][:RULES_PER_SECTION]
        bad = [r for r in useful if r.value < 0][:RULES_PER_SECTION]
        dropped = len(rules) - len(good) - len(bad)
    retain = "\n".join(r.text(complete) for r in good) or "(no rule yet)"
    avoid = "\n".join(r.text(complete) for r in bad) or "(no rule yet)"
    directions = (f"{covers_line(episodes)} Kept {len(good) + len(bad)} of {len(rules)} rules"
                  f"{'' if not dropped else f' (the {dropped} others: seen once, or adding least to a coarser rule)'}. "
                  "Where no rule matches a situation, play a legal move and learn from it.")
    return (f"Strategies to retain:\n{retain}\n\nMistakes to avoid:\n{avoid}\n\n"
            f"Directions for the next episode:\n{directions}")
