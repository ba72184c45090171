"""The learner's memory: pieces of experience, the table they add up to, and that table as summary rules.

A piece of experience (`Item`) says: in a situation described at several levels of detail (finest first),
taking an option earned a judged reward, worth a utility to the learner. The table (`Evidence`) keeps, per
situation description and option, how often it was seen and the mean reward and utility. History fills the
table from raw episodes; a summary fills it from the rules written in its text. Both feed the same decision,
so what a summary leaves out is exactly what the learner cannot use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

MAX_REFS = 3  # where a History entry was seen, kept for the reply's citation


@dataclass(frozen=True)
class Item:
    """One piece of experience. `ref`: where it was seen ("Previous episode 3, step 5"), for citations."""

    keys: tuple[str, ...]
    option: str
    reward: float
    utility: float
    ref: Optional[str] = None


@dataclass
class Stat:
    n: float = 0.0
    reward: float = 0.0  # sums
    utility: float = 0.0
    refs: list[str] = field(default_factory=list)

    @property
    def mean_reward(self) -> float:
        return self.reward / self.n if self.n else 0.0

    @property
    def mean_utility(self) -> float:
        return self.utility / self.n if self.n else 0.0


@dataclass
class Evidence:
    """Situation description -> option -> Stat, with each description's coarser parent and level."""

    table: dict[str, dict[str, Stat]] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)
    level: dict[str, int] = field(default_factory=dict)
    episodes: set[int] = field(default_factory=set)  # previous episodes this evidence covers

    def add(self, item: Item, weight: float = 1.0) -> None:
        seen: set[str] = set()
        for depth, key in enumerate(item.keys):
            if key in seen:  # a situation described the same at two levels counts once
                continue
            seen.add(key)
            self.level.setdefault(key, depth)
            if depth + 1 < len(item.keys):
                self.parent.setdefault(key, item.keys[depth + 1])
            stat = self.table.setdefault(key, {}).setdefault(item.option, Stat())
            stat.n += weight
            stat.reward += weight * item.reward
            stat.utility += weight * item.utility
            if item.ref and len(stat.refs) < MAX_REFS and item.ref not in stat.refs:
                stat.refs.append(item.ref)

    def add_stat(self, key: str, option: str, n: float, reward: float, utility: float) -> None:
        """A rule read from a summary: `n` observations of mean `reward` and `utility`."""
        stat = self.table.setdefault(key, {}).setdefault(option, Stat())
        stat.n += n
        stat.reward += n * reward
        stat.utility += n * utility

    def merge(self, other: "Evidence") -> None:
        for key, options in other.table.items():
            mine = self.table.setdefault(key, {})
            for option, stat in options.items():
                s = mine.setdefault(option, Stat())
                s.n += stat.n
                s.reward += stat.reward
                s.utility += stat.utility
                s.refs.extend([r for r in stat.refs if r not in s.refs][: max(0, MAX_REFS - len(s.refs))])
        for key, value in other.parent.items():
            self.parent.setdefault(key, value)
        for key, value in other.level.items():
            self.level.setdefault(key, value)
        self.episodes |= other.episodes

    def total(self, key: str) -> float:
        return sum(s.n for s in self.table.get(key, {}).values())

    def __len__(self) -> int:
        return sum(len(options) for options in self.table.values())


# ----- rules: the table as plain text, and back ---------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    key: str
    option: str
    n: float
    reward: float
    utility: float
    total: float  # observations of the situation (predictive rules: `n of total`)
    predictive: bool

    @property
    def value(self) -> float:
        return self.n / self.total if self.predictive and self.total else self.utility

    def text(self, precise: bool = False) -> str:
        """The rule as a line a person can read and edit (`precise`: every digit, nothing rounded)."""
        if self.predictive:
            return f"[{self.key}] {self.option}: seen {_num(self.n)} of {_num(self.total)} times"
        fmt = "+.17g" if precise else "+.4g"
        return (f"[{self.key}] {self.option}: worth {self.utility:{fmt}} "
                f"(judged reward {self.reward:{fmt}}, {_num(self.n)} times)")


_RULE = re.compile(r"^\s*[-*]?\s*\[(?P<key>[^\]]*)\]\s*(?P<option>.+?):\s*(?P<rest>.*)$")
_JUDGED = re.compile(r"(?:worth|judged)\s+(?P<u>[-+]?\d*\.?\d+(?:e[-+]?\d+)?)", re.IGNORECASE)
_REWARD = re.compile(r"reward\s+(?P<r>[-+]?\d*\.?\d+(?:e[-+]?\d+)?)", re.IGNORECASE)
_TIMES = re.compile(r"(?P<n>\d*\.?\d+)\s+times", re.IGNORECASE)
_SEEN = re.compile(r"seen\s+(?P<n>\d*\.?\d+)\s+of\s+(?P<t>\d*\.?\d+)", re.IGNORECASE)
_COVERS = re.compile(r"Covers previous episodes:\s*(?P<list>[0-9 ,\-]+)", re.IGNORECASE)


def parse_rules(text: str) -> tuple[list[Rule], set[int]]:
    """The rules of a summary text (any line `[situation] option: ...`) and the episodes it says it covers.
    `worth` is what the option is worth to the learner (its judged reward plus, discounted, what followed it);
    `judged reward` the immediate reward it judged the step earned (never the verifier's). A person's rule may
    leave out the counts: `[any round] cheat: worth +3` counts once, its reward is its worth (`judged +3`, the
    older wording, reads the same); `[...] X: seen 4 of 5 times` is a prediction rule."""
    rules: list[Rule] = []
    covered: set[int] = set()
    for line in (text or "").split("\n"):
        covers = _COVERS.search(line)
        if covers:
            covered |= _episode_set(covers.group("list"))
            continue
        m = _RULE.match(line)
        if not m:
            continue
        rest = m.group("rest")
        seen = _SEEN.search(rest)
        if seen:
            n, total = float(seen.group("n")), float(seen.group("t"))
            if total <= 0 or n < 0:
                continue
            rules.append(Rule(m.group("key").strip(), m.group("option").strip(), n, 0.0, 0.0, total, True))
            continue
        judged = _JUDGED.search(rest)
        if not judged:
            continue
        utility = float(judged.group("u"))
        reward_m = _REWARD.search(rest)
        times = _TIMES.search(rest)
        n = float(times.group("n")) if times else 1.0
        reward = float(reward_m.group("r")) if reward_m else utility
        if n <= 0:
            continue
        rules.append(Rule(m.group("key").strip(), m.group("option").strip(), n, reward, utility, n, False))
    return rules, covered


def evidence_from_rules(rules: Iterable[Rule]) -> Evidence:
    evidence = Evidence()
    for rule in rules:
        if rule.predictive:
            evidence.add_stat(rule.key, rule.option, rule.n, 0.0, 1.0)
            rest = rule.total - rule.n  # the other outcomes of that situation, unnamed
            if rest > 0:
                evidence.add_stat(rule.key, OTHER, rest, 0.0, 0.0)
        else:
            evidence.add_stat(rule.key, rule.option, rule.n, rule.reward, rule.utility)
    return evidence


OTHER = "(something else)"  # the outcomes a prediction rule does not name


def rules_of(evidence: Evidence, predictive: bool) -> list[Rule]:
    """Every (situation, option) of the table as a rule."""
    rules = []
    for key, options in evidence.table.items():
        total = sum(s.n for s in options.values())
        for option, stat in options.items():
            if option == OTHER:
                continue
            rules.append(Rule(key, option, stat.n, stat.mean_reward, stat.mean_utility, total, predictive))
    return rules


def covers_line(episodes: set[int]) -> str:
    return f"Covers previous episodes: {_ranges(sorted(episodes)) or 'none'}."


def _ranges(numbers: list[int]) -> str:
    out: list[str] = []
    start = prev = None
    for n in numbers:
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = prev = n
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(out)


def _episode_set(text: str) -> set[int]:
    found: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        try:
            lo, hi = int(a), int(b or a)
        except ValueError:
            continue
        if 0 < lo <= hi and hi - lo < 100_000:
            found.update(range(lo, hi + 1))
    return found


def _num(x: float) -> str:
    return f"{x:g}"
