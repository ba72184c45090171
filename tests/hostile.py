"""Hostile text for the gate's tests: a corpus of strings that drive a terminal when printed raw
(title, clipboard, erase, cursor moves, device control, 8-bit controls, bidi and invisible text,
overwrite tricks, markup, sheer size), and a database holding them wherever stored text lives."""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
from pathlib import Path

ESC, BEL, ST = "\x1b", "\x07", "\x1b\\"
CLIP = base64.b64encode(b"rm -rf ~").decode()

# name -> text. Each one alone would change what a terminal shows or does if printed raw.
CORPUS: dict[str, str] = {
    "osc0-bel": f"{ESC}]0;pwned{BEL}",
    "osc2-st": f"{ESC}]2;pwned-st{ST}",
    "osc1-icon": f"{ESC}]1;pwned-icon{BEL}",
    "osc8-link": f"{ESC}]8;;https://evil.example/{ST}click me{ESC}]8;;{ST}",
    "osc52-st": f"{ESC}]52;c;{CLIP}{ST}",
    "osc52-bel": f"{ESC}]52;p;{CLIP}{BEL}",
    "csi-erase-screen": f"{ESC}[2J{ESC}[3J",
    "csi-erase-line": f"{ESC}[2K{ESC}[1K",
    "csi-home": f"{ESC}[H",
    "csi-cursor-to": f"{ESC}[5;5HX",
    "csi-cursor-up": f"{ESC}[10A{ESC}[3D",
    "csi-save-restore": f"{ESC}[s{ESC}7moved{ESC}8{ESC}[u",
    "csi-scroll-region": f"{ESC}[1;2r",
    "csi-alt-screen": f"{ESC}[?1049h",
    "csi-sgr-hide": f"{ESC}[8mhidden{ESC}[0m",
    "dcs": f"{ESC}P1$r0m{ST}",
    "dcs-tmux-passthrough": f"{ESC}Ptmux;{ESC}{ESC}]52;c;{CLIP}{BEL}{ST}",
    "apc-pm-sos": f"{ESC}_apc{ST}{ESC}^pm{ST}{ESC}Xsos{ST}",
    "c1-csi": "\x9b2J\x9b1;1H",
    "c1-osc": "\x9d0;c1-title\x9c",
    "c1-dcs": "\x90dcs\x9c",
    "c1-nel-ind": "a\x85b\x84c\x8dd",
    "bidi-rlo": "abc\u202edcba\u202c",
    "bidi-isolates": "x\u2066isolated\u2069\u2067rtl\u2069\u2068first\u2069",
    "bidi-marks": "\u200fmark\u200e\u061c",
    "nul": "nul\x00byte",
    "cr-overwrite": "harmless text\rEVIL",
    "backspace": "abc\b\b\bXYZ",
    "bell-vt-ff": f"a{BEL}b\x0bc\x0cd",
    "del": "del\x7fchar",
    "zero-width": "zero\u200bwidth\u200c\u200d\u2060\ufeff",
    "tag-chars": "tag\U000e0001\U000e0041\U000e0042\U000e007f",
    "variation-smuggle": "v\ufe00\U000e0100\U000e01ef",
    "invisible-fillers": "f\u3164\u115f\u00ad\u180e",
    "line-separators": "ls\u2028ps\u2029",
    "rich-markup": "[@click=app.quit]quit[/] [link=https://evil.example]l[/link] [bold red]r[/]",
    "textual-markup": "[$accent]var[/] [B]big[/B] [ reverse]x",
    "backslash-end": "ends with a backslash \\",
    "long-line": "L" * 5000 + f"{ESC}]0;long{BEL}" + "M" * 5000,
    "many-lines": "\n".join(f"line {i}" for i in range(500)) + f"{ESC}[2J",
    "report-payload": f"{ESC}]0;pwned{BEL}{ESC}[2J{ESC}]52;c;{CLIP}{ST}",
}

# One line of each (actions and model names are one line; stop reasons are joined to one line).
ONE_LINE = {name: " ".join(text.split("\n")) for name, text in CORPUS.items()}
ALL = "".join(CORPUS.values())


# A 400 whose message holds the sequences raw, as a server that writes its own error body sends it.
ERROR_BODY = ('{"error": {"message": "' + CORPUS["report-payload"] + " " + CORPUS["c1-osc"] + CORPUS["bidi-rlo"]
              + '", "type": "invalid_request_error", "code": 400}}')


def short(name: str) -> str:
    """A corpus entry cut to a few hundred characters (for ids, names and cells)."""
    return ONE_LINE[name][:300]


# ----- a database holding the corpus ---------------------------------------------------------------
REPLY_NAMES = list(CORPUS)
# A model whose name is hostile: litellm routes it by its prefix, the fake server answers any name.
MODEL = "hosted_vllm/fake" + CORPUS["osc0-bel"] + CORPUS["bidi-rlo"]


def reply_for(request: dict) -> str:
    """The fake server's reply: the corpus around a parsable answer whose action is hostile too;
    a summary request gets the corpus in all three sections."""
    messages = request.get("messages") or []
    prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    if "<what worked>" in prompt:  # the summary request (s3gym_games.prompt)
        return ("Strategies to retain:\n" + CORPUS["report-payload"] + CORPUS["bidi-rlo"] + "\n"
                "Mistakes to avoid:\n" + CORPUS["osc52-bel"] + CORPUS["c1-csi"] + "\n"
                "Directions for the next episode:\n" + CORPUS["many-lines"][:400] + CORPUS["cr-overwrite"])
    count = reply_for.count = getattr(reply_for, "count", 0) + 1
    name = REPLY_NAMES[count % len(REPLY_NAMES)]
    return f"{CORPUS[name][:2000]}\nAnswer: {short(name)[:120]}{CORPUS['osc0-bel']}, Score: 1"


def build_hostile_db(path: Path, base_url: str, server=None) -> dict:
    """A store whose text is hostile wherever stored text lives: a summary run and a history run
    (pairs) played by a model with a hostile name answering with the corpus (replies, actions,
    prompts, summaries); a run stopped by a 400 whose
    message is hostile (its stop reason); a run with a hostile id, model name, api base and note;
    hostile feedback, faults, observations and episode models; a human summary version; a sweep with a hostile
    model and note; a dataset, a training and a study with hostile ids. `server` (a FakeOpenAI at
    `base_url`) answers with `reply_for`. Returns the ids."""
    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.models import Checkpoint, Episode, RunConfig, SweepConfig
    from s3gym_tui.store import ExpertRef, LossPoint, Store, Study, Training, TrainingCheckpoint
    from s3gym_tui.training.dataset import build_dataset
    from s3gym_tui.training.evaluate import create_eval_run

    store = Store(path)
    small = dict(game="trust", explore_episodes=3, eval_every=3, eval_episodes=1, step_cap=4, max_retries=0,
                 api_base=base_url)
    played = store.runs.create_run(RunConfig(model=MODEL, pathway="summary", **small))
    asyncio.run(ProtocolRunner(store, played, backoff_base_s=0).run_protocol())
    paired = store.runs.create_run(RunConfig(model=MODEL, pathway="history", **small))  # History vs Summary pairs
    asyncio.run(ProtocolRunner(store, paired, backoff_base_s=0).run_protocol())
    stopped = store.runs.create_run(RunConfig(model="hosted_vllm/fake", pathway="history", **small))
    if server is not None:  # the 400 of the report: its message becomes the run's stop reason
        server.behave(times=None, status=400, raw_body=ERROR_BODY)
        asyncio.run(ProtocolRunner(store, stopped, backoff_base_s=0).run_protocol())
        server.rules.clear()
    hostile_id = "run-" + short("osc0-bel") + short("c1-csi") + short("bidi-rlo")
    named = store.runs.create_run(RunConfig(model="hosted_vllm/" + short("report-payload"), pathway="history",
                                            **{**small, "api_base": "http://127.0.0.1:9/" + short("osc2-st")}),
                                  run_id=hostile_id, note=CORPUS["report-payload"] + CORPUS["many-lines"])
    store.runs.set_run_status(named.id, "failed", reason="400 " + ONE_LINE["report-payload"] + ONE_LINE["osc52-st"])
    store.runs.set_run_note(played.id, CORPUS["rich-markup"] + CORPUS["report-payload"])
    store.summaries.add_summary(played.id, CORPUS["report-payload"] + CORPUS["textual-markup"],
                                CORPUS["osc52-st"] + CORPUS["c1-osc"], CORPUS["cr-overwrite"] + CORPUS["tag-chars"],
                                author="human:" + short("osc2-st"))
    sweep, _ = store.sweeps.create_sweep(SweepConfig(games=("trust",), pathways=("none",),
                                                     models=("hosted_vllm/" + short("osc52-bel"),),
                                                     settings={"explore_episodes": 3, "eval_every": 3,
                                                        "eval_episodes": 1}))
    store.sweeps.set_sweep_status(sweep.id, "stopped", note=CORPUS["report-payload"] + CORPUS["dcs"])
    dataset = asyncio.run(build_dataset(store, played.id, threshold=-1e9)).dataset
    training = store.trainings.add_training(Training(id="sft-" + short("osc52-st") + short("c1-dcs"), games=("trust",),
                                                     source_run=played.id, dataset_id=dataset.id, base="tiny", epochs=1,
                                                     status="failed", error=CORPUS["report-payload"]))
    for x in (0, 1):
        store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id=training.id, x=x,
                                                                   model="trained/" + short("osc0-bel") + f"/{x}"))
    store.trainings.add_losses(training.id, [LossPoint(step=i, loss=3.0 - i, phase="sft") for i in (1, 2)])
    evaluation = create_eval_run(store, training, played.config, [0, 1], eval_episodes=1)
    for x, mean in ((0, 2.0), (1, 1.0)):
        episode = Episode(id=f"{evaluation.id}-c{x}", run_id=evaluation.id, game="trust", mode="eval",
                          phase="eval", seed=evaluation.config.eval_seed(0), index=0, checkpoint=x,
                          model="trained/" + short("osc0-bel"), pathway="trained")
        store.episodes.add_episode(episode)
        store.episodes.finish_episode(episode.id, mean)
        store.checkpoints.add_checkpoint(Checkpoint(run_id=evaluation.id, x=x, episode_ids=(episode.id,), scores=(mean,)))
    store.trainings.add_study(Study(id="study-" + short("osc2-st") + short("c1-csi"), games=("trust",),
                                    experts=(ExpertRef(training_id=training.id, x=1, game="trust",
                                             model="trained/x/1"),),
                                    settings={"cells": {f"{training.id}|trust": evaluation.id},
                                    "base_cells": {"trust": evaluation.id}}, status="failed"))
    ids = {"played": played.id, "paired": paired.id, "stopped": stopped.id, "named": named.id, "sweep": sweep.id,
           "training": training.id, "evaluation": evaluation.id, "aspire": _hostile_aspire(store)}
    store.close()
    conn = sqlite3.connect(path)  # text the engine never writes this way, written as a damaged file could hold it
    with conn:
        first = conn.execute("SELECT id FROM episodes WHERE run_id = ? ORDER BY rowid LIMIT 1",
                             (played.id,)).fetchone()[0]
        ids["episode"] = first
        conn.execute("UPDATE episodes SET model = ? WHERE id = ?", ("hosted_vllm/" + short("osc2-st"), first))
        conn.execute("UPDATE steps SET feedback = ?, fault = ?, observation = ? WHERE episode_id = ?",
                     (CORPUS["report-payload"] + CORPUS["cr-overwrite"], CORPUS["osc52-bel"] + CORPUS["c1-csi"],
                      CORPUS["csi-erase-screen"] + CORPUS["bidi-isolates"], first))
    conn.close()
    return ids


def _hostile_aspire(store) -> str:
    """An ASPIRE run whose goal, model, decisions (tool, arguments, result, the agent's words), candidates,
    claim and status reason are hostile; it has ended, so its hidden scores are shown too."""
    aspire = store.aspire.create_aspire_run(goal_id="rules", goal_text=CORPUS["report-payload"] + CORPUS["bidi-rlo"],
                                            model="hosted_vllm/" + short("osc52-st"), protocol="final", budget={"calls": 9},
                                            aspire_id="aspire-" + short("osc0-bel") + short("c1-csi"))
    store.aspire.add_aspire_decision(aspire.id, tool="practise" + ONE_LINE["osc2-st"],
                                     arguments={"game": CORPUS["osc52-bel"], "note": CORPUS["many-lines"]},
                                     result=CORPUS["report-payload"] + CORPUS["cr-overwrite"], outcome="refused",
                                     category="practice", reply=CORPUS["csi-erase-screen"] + CORPUS["dcs"], calls=1)
    base = store.aspire.add_aspire_candidate(aspire.id, kind="base", model="m", candidate_id=aspire.id + "-base",
                                             note=CORPUS["c1-osc"])
    child = store.aspire.add_aspire_candidate(aspire.id, kind="memory", model="m", parent_id=base.id,
                                              candidate_id="cand-" + short("osc0-bel"),
                                              frozen_ref=CORPUS["osc8-link"], note=CORPUS["report-payload"])
    store.aspire.add_aspire_decision(aspire.id, tool="validate", arguments={"candidate": child.id}, outcome="ok",
                                     result=CORPUS["osc52-st"] + CORPUS["tag-chars"], category="validation")
    store.aspire.add_aspire_claim(aspire.id, text=CORPUS["report-payload"] + CORPUS["rich-markup"], candidate_id=child.id,
                                  claimed_delta=0.5)
    store.aspire.set_hidden_score(aspire.id, base.id, "base", 0.25, {}, 2)
    store.aspire.set_hidden_score(aspire.id, child.id, "final", 0.5, {}, 2)
    store.aspire.set_aspire_candidates(aspire.id, base=base.id, final=child.id)
    store.aspire.set_aspire_status(aspire.id, "finished", ONE_LINE["report-payload"] + ONE_LINE["c1-dcs"])
    return aspire.id


def stored_texts(path: Path) -> list[str]:
    """Every text value in the database (to check that stored text stays exact)."""
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        texts = []
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                texts += [v for v in row if isinstance(v, str)]
        return texts
    finally:
        conn.close()


def dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False)


# ----- fixtures: the database is built once (a model over HTTP plays a run), copied per test ----------
def _fixtures():
    import shutil

    import pytest

    from tests.fake_openai import FakeOpenAI

    @pytest.fixture(scope="session")
    def hostile_template(tmp_path_factory) -> tuple[Path, dict]:
        path = tmp_path_factory.mktemp("hostile") / "hostile.db"
        with FakeOpenAI(reply=reply_for) as server:
            ids = build_hostile_db(path, server.base, server)
        return path, ids

    @pytest.fixture
    def hostile_db(hostile_template, tmp_path) -> tuple[Path, dict]:
        """A private copy of the hostile database and its ids."""
        source, ids = hostile_template
        target = tmp_path / "hostile.db"
        shutil.copy(source, target)
        return target, ids

    return hostile_template, hostile_db


hostile_template, hostile_db = _fixtures()
