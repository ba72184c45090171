"""Diagnosis proven on ground truth: the glass-box learner explains every choice, so the diagnosis features
must find what it did. A real sweep of the learner (chess: History beats Summary; pvz: Summary beats
History; trust: mixed) is stored once; the tests read it the way the screens and the report do."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import statistics
from contextlib import closing
from dataclasses import replace

import pytest

from s3gym_tui.engine.compare import align, best_pairs, context_at, first_divergence
from s3gym_tui.engine.curation import effect_text
from s3gym_tui.engine.experience import turns_from_steps
from s3gym_tui.engine.finding import divergence_steps
from s3gym_tui.engine.glossary import FEW_BLOCKS, NO_VARIANCE
from s3gym_tui.engine.judging import game_range_width, judging_report, verdict
from s3gym_tui.engine.leak_probe import probe, without_evaluation_blocks
from s3gym_tui.engine.play import fork_session
from s3gym_games.prompt import TurnRecord, render_episode_block
from s3gym_tui.engine.report import game_scales, on_game_scales, run_report
from s3gym_tui.engine.report_tables import build_report
from s3gym_tui.engine.runner import ProtocolRunner, call_settings
from s3gym_tui.engine.sweep import SweepRunner
from s3gym_tui.engine.events import EpisodeDone
from s3gym_tui.engine.trial import try_summary
from s3gym_tui.engine.visibility import Borrow, state_summary
from s3gym_tui.models import SweepConfig, eval_episode_id, explore_episode_id
from s3gym_tui.store import Store, audit
from s3gym_tui.store.search import SearchFilters

GAMES = ("chess", "trust", "pvz")
SCHEDULE = {"explore_episodes": 9, "eval_every": 3, "eval_episodes": 3}  # checkpoints 0, 3, 6, 9: 3 blocks
LAST = SCHEDULE["explore_episodes"]
# What the learner's replies cite: `Evidence: ...` (one decision) or `<decision>: ...` (several).
CITED = re.compile(r"^(?P<decision>Evidence|[^:\n]+): (?P<how>exact match|near match \(level \d+\)), "
                   r"(?P<source>History|summary rule) \[(?P<key>[^\]]*)\] (?P<option>.+?): (?P<rest>.*)$",
                   re.MULTILINE)
SEEN_AT = re.compile(r"Previous episode (\d+), step \d+")
RULE = re.compile(r"^\[(?P<key>[^\]]*)\] (?P<option>.+?): ", re.MULTILINE)


@pytest.fixture(scope="module")
def sweep_db(tmp_path_factory):
    """The learner on three games x {none, history, summary}, by the real sweep and runner."""
    path = tmp_path_factory.mktemp("diagnosis") / "learner.db"
    with Store(path) as store:
        config = SweepConfig(games=GAMES, pathways=("none", "history", "summary"), models=("learner",),
                             settings=SCHEDULE)
        stored, _ = store.sweeps.create_sweep(config)
        final = asyncio.run(SweepRunner(store, stored, backoff_base_s=0).run())
        assert final.status == "finished"
    return path


@pytest.fixture
def scratch_db(sweep_db, tmp_path):
    """A copy of the sweep's database, for a test that adds runs, versions or episodes to it."""
    path = tmp_path / "scratch.db"
    with closing(sqlite3.connect(sweep_db)) as source, closing(sqlite3.connect(path)) as copy:
        source.backup(copy)
    return path


def sweep_runs(store) -> dict[tuple[str, str], object]:
    runs = {}
    for run in store.runs.list_runs(limit=100):
        if run.sweep_id is not None:
            runs[(run.config.game, run.config.pathway)] = run
    assert len(runs) == 3 * len(GAMES)
    return runs


def cited(reply: str) -> dict[str, re.Match]:
    """Decision -> the evidence its choice cites (decisions chosen by the prior cite none)."""
    return {m["decision"]: m for m in CITED.finditer(reply)}


# ----- Pairs ------------------------------------------------------------------------------------------
def test_pairs_rank_the_pairs_that_diverge_above_the_ties(sweep_db):
    """At x=0 neither pathway has experience: the same prior, the same actions, a tie on every seed (so a pair
    is the same seed at the same checkpoint). Learning makes the pathways diverge; every pair ranked above the
    first tie diverged, and Pairs' winners point the way the report's Delta NABA does."""
    with Store(sweep_db) as store:
        pairs = best_pairs(store, limit=None)
        assert len(pairs) == len(GAMES) * 4 * SCHEDULE["eval_episodes"]  # every checkpoint, every seed
        diverged = [first_divergence(store.episodes.steps(p.history_episode), store.episodes.steps(p.summary_episode)) is not None
                    for p in pairs]
        at_zero = [d for p, d in zip(pairs, diverged) if p.x == 0]
        assert len(at_zero) == len(GAMES) * SCHEDULE["eval_episodes"]
        assert not any(at_zero) and all(p.winner == "tie" for p in pairs if p.x == 0)
        ties = [i for i, p in enumerate(pairs) if p.winner == "tie"]
        first_tie = ties[0]
        assert first_tie > 0 and ties == list(range(first_tie, len(pairs)))  # every tie below every win
        assert all(diverged[:first_tie])
        assert all(p.winner == "tie" for p, d in zip(pairs, diverged) if not d)  # same actions, same score
        assert [abs(p.diff) for p in pairs] == sorted((abs(p.diff) for p in pairs), reverse=True)
        for game in GAMES:
            assert any(p.game == game and p.winner != "tie" for p in pairs)

        report = build_report(on_game_scales([run_report(store, r) for r in sweep_runs(store).values()]))
        delta = {row["game"]: row["mean_delta"] for row in report.table("delta_naba").records()}
        winners = {game: {p.winner for p in pairs if p.game == game} - {"tie"} for game in GAMES}
        assert winners["chess"] == {"history"} and delta["chess"] < 0  # precise evidence: History wins
        assert winners["pvz"] == {"summary"} and delta["pvz"] > 0  # rules from every episode: Summary wins


# ----- Compare's first divergence -------------------------------------------------------------------------
def test_the_first_divergence_is_where_the_contexts_decide_differently(sweep_db):
    """For every pair that diverged: the two sides saw the same states up to the divergence (same seed, same
    actions), so what differs there is the context alone; at that step each side cites evidence that is in its
    own context as Compare shows it (the History episodes it names, the summary rule it names), and the two
    citations differ. Search's divergence filter finds exactly these steps."""
    with Store(sweep_db) as store:
        found: set[tuple[str, int]] = set()
        pairs = [p for p in best_pairs(store, limit=None) if p.winner != "tie"]
        assert pairs
        for p in pairs:
            h_steps, s_steps = store.episodes.steps(p.history_episode), store.episodes.steps(p.summary_episode)
            k = first_divergence(h_steps, s_steps)
            rows = align(h_steps, s_steps)
            assert all(row.equal for row in rows[:k]) and not rows[k].equal
            assert [s.observation for s in h_steps[:k + 1]] == [s.observation for s in s_steps[:k + 1]]
            found |= {(p.history_episode, k), (p.summary_episode, k)}

            h_context = context_at(store, store.episodes.get_episode(p.history_episode), k, max_chars=10**9)
            s_episode = store.episodes.get_episode(p.summary_episode)
            s_context = context_at(store, s_episode, k, max_chars=10**9)
            assert (h_context.kind, s_context.kind) == ("history", "summary")
            assert s_context.text == store.summaries.get_summary(s_episode.summary_id).as_tips()
            h_cited, s_cited = cited(h_steps[k].reply), cited(s_steps[k].reply)
            for m in h_cited.values():
                assert m["source"] == "History"
                for number in SEEN_AT.findall(m["rest"]):
                    assert f"--- Previous episode {number} (seed " in h_context.text
            for m in s_cited.values():
                assert m["source"] == "summary rule"
                assert f"[{m['key']}] {m['option']}: " in s_context.text
            h_evidence = {d: (m["key"], m["option"]) for d, m in h_cited.items()}
            s_evidence = {d: (m["key"], m["option"]) for d, m in s_cited.items()}
            assert h_evidence != s_evidence, (p, h_steps[k].reply, s_steps[k].reply)
        assert divergence_steps(store, SearchFilters(divergences=True)) == found


def test_where_history_wins_on_precise_evidence_it_used_what_the_summary_lacked(sweep_db):
    """Chess (where each piece's exact past decides): at the first divergence of every pair History won, the
    History side chose a piece's move by an exact or near match from its History whose situation has no rule
    in the summary the Summary episode saw, and the Summary side chose that piece differently."""
    with Store(sweep_db) as store:
        pairs = [p for p in best_pairs(store, limit=None, game="chess") if p.winner == "history"]
        assert pairs
        for p in pairs:
            h_steps, s_steps = store.episodes.steps(p.history_episode), store.episodes.steps(p.summary_episode)
            k = first_divergence(h_steps, s_steps)
            summary = context_at(store, store.episodes.get_episode(p.summary_episode), k, max_chars=10**9).text
            situations = {m["key"] for m in RULE.finditer(summary)}
            s_cited = cited(s_steps[k].reply)
            lacked = [d for d, m in cited(h_steps[k].reply).items()
                      if m["key"] not in situations
                      and (d not in s_cited or s_cited[d]["option"] != m["option"])]
            assert lacked, (p, h_steps[k].reply, summary)


# ----- self-judging: agreement, NMAE, coupling -------------------------------------------------------------
def _eval_judging(store, run, x, scale):
    pairs = [(s.self_score, s.reward) for e in store.episodes.list(run.id, phase="eval") if e.checkpoint == x
             for s in store.episodes.steps(e.id, include_prompt=False)]
    return judging_report(pairs, scale=scale)


def test_self_judgement_is_defined_and_tracks_rewards_better_after_experience(sweep_db):
    """The right way: agreement (share of steps where s > 0 iff r > 0) rises and NMAE (mean |norm s - norm r|
    on the game's one scale) falls from x=0 (no experience: the prior's score) to the last checkpoint, pooled
    over a game's learning runs. Without experience nothing moves. PvZ's NMAE is — because the learner's
    self-score there is constant (every survived turn pays +1, and it says so), never a made-up 0."""
    with Store(sweep_db) as store:
        runs = sweep_runs(store)
        reports = on_game_scales([run_report(store, r) for r in runs.values()])
        scales = game_scales(reports)
        for game in GAMES:
            none = [_eval_judging(store, runs[(game, "none")], x, scales[game]) for x in range(0, LAST + 1, 3)]
            assert all(rep == none[0] for rep in none)  # no experience: the same judgement at every checkpoint
        for game in ("chess", "trust"):
            learning = [runs[(game, pathway)] for pathway in ("history", "summary")]
            first = [_eval_judging(store, run, 0, scales[game]) for run in learning]
            last = [_eval_judging(store, run, LAST, scales[game]) for run in learning]
            assert all(r.agreement is not None and r.nmae is not None for r in first + last)
            assert statistics.mean(r.agreement for r in last) > statistics.mean(r.agreement for r in first)
            assert statistics.mean(r.nmae for r in last) < statistics.mean(r.nmae for r in first)

        report = build_report(reports)
        by_run = {(row["run"], row["phase"]): row for row in report.table("judging_by_run").records()}
        for (game, pathway), run in runs.items():
            row = by_run[(run.id, "all")]
            assert row["steps"] > 0 and row["missing"] == 0 and row["agreement"] is not None
            if game == "pvz":
                assert row["nmae"] is None and "s constant" in row["why"]
            else:
                assert row["nmae"] is not None and row["why"] is None


def test_the_coupling_is_computed_from_the_real_blocks(sweep_db):
    """Block t holds the exploration episodes [x_t, x_t+1): its agreement A_t, recomputed here from the stored
    steps, and the next checkpoint's gain g_t = (y_t+1 - y_t) / score width, from the stored checkpoint means,
    are the report's; corr(A, g) is theirs, on every game. A run that learns nothing (none) has no gain to
    couple with: —, "no variance", never 0. PvZ's self-scores never vary, so its corr(-E, g) is — while its
    corr(A, g) stands. (On the learner the coupling is negative: its first block holds the largest gain and,
    played without experience, the worst judgement; the figure measures co-movement across blocks.)"""
    with Store(sweep_db) as store:
        runs = sweep_runs(store)
        reports = {r.run.id: r for r in on_game_scales([run_report(store, r) for r in runs.values()])}
        tables = build_report(list(reports.values()))
        rows = {row["run"]: row for row in tables.table("coupling").records()}
        for (game, pathway), run in runs.items():
            coupling = reports[run.id].coupling
            means = {c.x: statistics.mean(c.scores) for c in store.checkpoints.list(run.id)}
            xs = sorted(means)
            assert xs == [0, 3, 6, 9] and len(coupling.blocks) == 3 and coupling.n_used == 3
            width = game_range_width(game)
            for t, block in enumerate(coupling.blocks):
                steps = [s for e in store.episodes.list(run.id, phase="explore") if xs[t] <= e.index < xs[t + 1]
                         for s in store.episodes.steps(e.id, include_prompt=False)]
                verdicts = [verdict(s.self_score, s.reward) for s in steps]
                assert block.n == len(steps) and block.agreement == verdicts.count("agree") / len(steps)
                assert block.gain == pytest.approx((means[xs[t + 1]] - means[xs[t]]) / width)
            row = rows[run.id]
            assert row["corr_agreement_gain"] == coupling.corr_agreement
            assert row["corr_neg_nmae_gain"] == coupling.corr_neg_nmae
            if pathway == "none":
                assert all(b.gain == 0 for b in coupling.blocks)
                assert coupling.corr_agreement is None and coupling.why["corr_agreement"] == NO_VARIANCE
                continue
            assert coupling.corr_agreement == pytest.approx(statistics.correlation(
                [b.agreement for b in coupling.blocks], [b.gain for b in coupling.blocks]))
            if game == "pvz":
                assert all(b.nmae is None for b in coupling.blocks)
                assert coupling.corr_neg_nmae is None and coupling.why == {"corr_neg_nmae": FEW_BLOCKS}
            else:
                assert coupling.corr_neg_nmae == pytest.approx(statistics.correlation(
                    [-b.nmae for b in coupling.blocks], [b.gain for b in coupling.blocks]))
        by_game = {row["game"]: row for row in tables.table("coupling_by_game").records()}
        assert all(by_game[game]["blocks"] == 9 and by_game[game]["corr_agreement_gain"] is not None
                   for game in GAMES)


# ----- curation -----------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:coroutine 'LearnerLLM.acompletion' was never awaited:RuntimeWarning")
def test_an_edited_summary_changes_the_checkpoint_the_curation_log_names(scratch_db):
    """The twin of the sweep's chess Summary run stops after its last exploration episode, before the state of
    its last checkpoint begins. A person deletes the rules to retain (the Summaries screen's store call); the
    log says the edit counts from x=9; resumed, the checkpoints before x=9 are the twin's exactly, and x=9 is
    played from a summary written from the edit: other actions, another score."""
    with Store(scratch_db) as store:
        twin = sweep_runs(store)[("chess", "summary")]
        run = store.runs.create_run(twin.config, run_id="edited-chess-summary")

        async def until_the_last_state() -> None:
            runner = ProtocolRunner(store, run, backoff_base_s=0)

            def stop(event) -> None:
                if isinstance(event, EpisodeDone) and event.episode.id == explore_episode_id(run.id, LAST - 1):
                    runner.stop("stopped by the test before the last state")

            runner.on_event = stop
            await runner.run_protocol()

        asyncio.run(until_the_last_state())
        assert store.runs.get_run(run.id).status == "stopped"
        assert {c.x for c in store.checkpoints.list(run.id)} <= {0, 3, 6}
        assert store.summaries.next_state(run.id) == LAST

        current = store.summaries.current_summary(run.id)
        assert "[" in current.retain  # the model's rules
        edited = store.summaries.edit_summary(current.id, "(no rule yet)", current.avoid, current.next, author="human:tester")
        log = store.summaries.summary_actions(run.id)[-1]
        assert (log["action"], log["version"], log["effective_from_x"]) == ("edit", edited.version, LAST)
        sentence = effect_text(store.runs.get_run(run.id), log["effective_from_x"], False, store.summaries.list(run.id), edited)
        assert f"From state x={LAST}, when the run resumes: the evaluation at checkpoint x={LAST}" in sentence

        final = asyncio.run(ProtocolRunner(store, store.runs.get_run(run.id), backoff_base_s=0).run_protocol())
        assert final.status == "finished"
        used = state_summary(store, run.id, LAST)
        assert used.parent_version == edited.version and used.author.startswith("model:")

        def actions(run_id, x):
            return [[s.action for s in store.episodes.steps(eval_episode_id(run_id, x, j))]
                    for j in range(SCHEDULE["eval_episodes"])]

        mine = {c.x: c.scores for c in store.checkpoints.list(run.id)}
        theirs = {c.x: c.scores for c in store.checkpoints.list(twin.id)}
        for x in (0, 3, 6):
            assert mine[x] == theirs[x] and actions(run.id, x) == actions(twin.id, x)
        assert actions(run.id, LAST) != actions(twin.id, LAST)
        assert mine[LAST] != theirs[LAST]
        # what the learner lost is what the person deleted: fewer pieces matched by a summary rule
        assert statistics.mean(mine[LAST]) < statistics.mean(theirs[LAST])


# ----- the learner as a leak detector ---------------------------------------------------------------------
class LeakyRunner(ProtocolRunner):
    """TEST DOUBLE, broken on purpose (not the real runner): each evaluation at x > 0 also sees `leaked`, a
    stored evaluation episode, rendered as one more History block. It records nothing of it, as a runner that
    renders text around the store's guards would."""

    def __init__(self, store, run, leaked) -> None:
        super().__init__(store, run, backoff_base_s=0)
        self.leaked = leaked

    async def evaluate(self, x, state):
        if x > 0:
            steps = self.store.episodes.steps(self.leaked.id)
            title = f"Previous episode {x + 1} (seed {self.leaked.seed}, {len(steps)} steps)"
            block = render_episode_block(title, turns_from_steps(steps))
            state = replace(state, history=replace(state.history, text=f"{state.history.text}\n\n{block}"))
        return await super().evaluate(x, state)


def test_the_learner_finds_an_evaluation_episode_fed_through_a_broken_context(scratch_db):
    """The probe replays a learner episode on its recorded Hint Messages block minus every History block of an
    evaluation seed. The double fed chess's evaluation episode on seed S (checkpoint 0) into its later
    evaluations: the learner memorises that seed's exact pieces, so it scores far above its replay without
    them, and that replay is what the honest run scored. Every real run, fork and trial replays exactly."""
    with Store(scratch_db) as store:
        runs = sweep_runs(store)
        honest = runs[("chess", "history")]
        leaked = store.episodes.get_episode(eval_episode_id(honest.id, 0, 0))
        run = store.runs.create_run(honest.config, run_id="leaky-chess-history")
        assert asyncio.run(LeakyRunner(store, run, leaked).run_protocol()).status == "finished"
        for x in (3, 6, 9):
            seen = [probe(store, store.episodes.get_episode(eval_episode_id(run.id, x, j)))
                    for j in range(SCHEDULE["eval_episodes"])]
            for j, one in enumerate(seen):  # the leak removed, every seed replays to the honest run's score
                assert one.dropped == (leaked.seed,)
                assert one.replayed == store.episodes.get_episode(eval_episode_id(honest.id, x, j)).score
            on_seed, others = seen[0], seen[1:]
            assert on_seed.seed == leaked.seed and on_seed.stored > 0.9
            assert on_seed.jump > 0.25, on_seed  # chess scores 0..1: a quarter of all pieces more, from one leak
            assert all(on_seed.jump > other.jump for other in others)  # the jump is on that seed

        for (game, pathway), real in runs.items():  # every real run
            if pathway == "none":
                continue
            for episode in store.episodes.list(real.id, phase="eval"):
                seen = probe(store, episode)
                assert seen.dropped == () and seen.jump == 0, seen

        trust_history, trust_summary = runs[("trust", "history")], runs[("trust", "summary")]
        forks = ((eval_episode_id(honest.id, LAST, 1), 2, None, None),  # sees what its source saw
                 (eval_episode_id(trust_history.id, 6, 2), 3, None, None),
                 (eval_episode_id(trust_history.id, 6, 2), 3, "summary", Borrow(trust_summary.id)))  # chosen
        for source, at, pathway, borrow in forks:
            settings = call_settings(store.runs.get_run(store.episodes.get_episode(source).run_id).config, backoff_base_s=0)
            fork = asyncio.run(fork_session(store, source, at, settings, pathway, borrow).play())
            seen = probe(store, fork)
            assert fork.fork_of == source and seen.dropped == () and seen.jump == 0, seen

        summary_run = runs[("chess", "summary")]
        version = store.summaries.list(summary_run.id)[-1]
        edited = store.summaries.edit_summary(version.id, "(no rule yet)", version.avoid, version.next, author="human:tester")
        means = []
        for tried in (version, edited):
            trial = asyncio.run(try_summary(store, summary_run, tried, backoff_base_s=0))
            for episode_id in trial.episode_ids:
                seen = probe(store, store.episodes.get_episode(episode_id))
                assert seen.dropped == () and seen.jump == 0, seen
            means.append(trial.mean)
        assert means[0] != means[1]  # a trial of an edit plays differently, and nothing leaks into it
        assert audit(store).ok


def test_the_probe_removes_only_evaluation_blocks_and_refuses_what_it_cannot_replay(sweep_db):
    turn = [TurnRecord("Round: 1 of 10", "collaborate", 2.0)]
    head = "[1 older episode(s) dropped to fit the history budget]"
    explore = render_episode_block("Previous episode 2 (seed 1, 1 steps)", turn)
    evaluation = render_episode_block("Previous episode 3 (seed 1000004, 1 steps)", turn)
    later = render_episode_block("Previous episode 4 (seed 3, 1 steps)", turn)
    text = "\n\n".join((head, explore, evaluation, later))
    assert without_evaluation_blocks(text) == ("\n\n".join((head, explore, later)), (1_000_004,))
    assert without_evaluation_blocks("\n\n".join((evaluation, later))) == (later, (1_000_004,))
    assert without_evaluation_blocks("\n\n".join((head, explore))) == ("\n\n".join((head, explore)), ())
    assert without_evaluation_blocks("Strategies to retain:\n[x] y: judged +1") == (
        "Strategies to retain:\n[x] y: judged +1", ())
    with Store(sweep_db) as store:
        episode = store.episodes.list(sweep_runs(store)[("trust", "none")].id, phase="eval")[0]
        with pytest.raises(ValueError, match="only the learner's episodes"):
            probe(store, episode.model_copy(update={"model": "scripted/trust"}))
