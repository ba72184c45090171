"""`s3gym export --format inspect`: the Inspect eval log of a scripted History run, read back with Inspect's
own library (inspect_ai.log), has one sample per episode with the store's verifier scores, self-judged
scores and, step by step, the prompts as sent and the replies; the log viewer's loaders list it and
`inspect view` serves it; secret values never reach the file; refusals are one line and write nothing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import pytest
from inspect_ai.log import list_eval_logs, read_eval_log, read_eval_log_sample_summaries

from s3gym_tui.cli import main
from s3gym_tui.models import Episode, RunConfig, Step
from s3gym_tui.store import Store

SECRET = "sk-inspectcanary-0123456789abcdef"


@pytest.fixture(scope="module")
def history_run(tmp_path_factory) -> tuple[Path, str]:
    """A scripted trust History run: 3 exploration episodes, an evaluation episode at x = 0, 2, 3."""
    db = tmp_path_factory.mktemp("inspect") / "h.db"
    code = main(["run", "trust", "-m", "scripted/trust", "-p", "history", "--episodes", "3", "--eval-every", "2",
                 "--eval-episodes", "1", "--step-cap", "5", "--progress", "none", "--db", str(db)])
    assert code == 0
    with Store(db) as store:
        return db, store.runs.list_runs(limit=1)[0].id


def _export(capsys, run_id: str, db: Path, *args: str) -> tuple[int, str]:
    code = main(["export", run_id, *args, "--db", str(db)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_samples_scores_and_messages_equal_the_store(history_run, tmp_path, capsys):
    db, run_id = history_run
    out = tmp_path / "run.eval"
    code, printed = _export(capsys, run_id, db, "-f", "inspect", "-o", str(out))
    assert code == 0, printed
    log = read_eval_log(str(out), resolve_attachments=True)
    with Store(db) as store:
        run = store.runs.get_run(run_id)
        episodes = {e.id: e for e in store.episodes.list(run_id)}
        assert {e.phase for e in episodes.values()} == {"explore", "eval"}
        assert len(log.samples) == len(episodes) == 6
        assert log.eval.model == run.config.model and log.eval.task_args["pathway"] == "history"
        assert log.status == "success" and log.results.total_samples == 6
        for sample in log.samples:
            episode = episodes[sample.id]
            steps = store.episodes.steps(episode.id)
            score = sample.scores["verifier"]
            assert score.value == episode.score
            assert score.metadata["self_scores"] == [s.self_score for s in steps]
            assert score.metadata["self_score_sum"] == pytest.approx(sum(s.self_score for s in steps))
            assert score.metadata["rewards"] == [s.reward for s in steps]
            assert (sample.metadata["phase"], sample.metadata["checkpoint"]) == (episode.phase, episode.checkpoint)
            expected = []  # step by step: the prompt as sent, then the reply
            for step in steps:
                expected += [(m["role"], m["content"]) for m in json.loads(store.prompts.prompt_of(step))]
                expected.append(("assistant", step.reply))
            assert [(m.role, m.text) for m in sample.messages] == expected
        late = max((s for s in log.samples if s.metadata["phase"] == "explore"), key=lambda s: s.metadata["index"])
        step = store.episodes.steps(late.id)[2]
        sent = json.loads(store.prompts.prompt_of(step))
        assert "Hint Messages" in sent[-1]["content"]  # History: earlier episodes in the prompt
        assert [m.text for m in late.messages if m.metadata["step"] == 2] == [m["content"] for m in sent] + [step.reply]
        evals = [e.score for e in episodes.values() if e.phase == "eval"]
        assert log.results.scores[0].metrics["eval_mean"].value == pytest.approx(sum(evals) / len(evals))


def test_the_viewer_lists_and_summarises_it(history_run, tmp_path, capsys):
    db, run_id = history_run
    folder = tmp_path / "logs"
    folder.mkdir()
    assert _export(capsys, run_id, db, "-f", "inspect", "-o", str(folder / f"{run_id}.eval"))[0] == 0
    (info,) = list_eval_logs(str(folder))
    assert Path(urllib.parse.urlparse(info.name).path).name == f"{run_id}.eval"
    assert (info.task, info.task_id) == ("s3gym/trust", run_id)
    with Store(db) as store:
        scores = {e.id: e.score for e in store.episodes.list(run_id)}
    summaries = read_eval_log_sample_summaries(info.name)
    assert {s.id: s.scores["verifier"].value for s in summaries} == scores


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_inspect_view_serves_it(history_run, tmp_path, capsys):
    """The log viewer's own server (`inspect view`, on loopback) lists the file and loads it whole."""
    db, run_id = history_run
    folder = tmp_path / "logs"
    folder.mkdir()
    assert _export(capsys, run_id, db, "-f", "inspect", "-o", str(folder / "run.eval"))[0] == 0
    port = _free_port()
    inspect = Path(sys.executable).with_name("inspect")
    server = subprocess.Popen([str(inspect), "view", "--host", "127.0.0.1", "--port", str(port), "--log-dir",
                               str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        files, deadline = None, time.monotonic() + 60
        while files is None and time.monotonic() < deadline and server.poll() is None:
            try:
                files = _get(f"http://127.0.0.1:{port}/api/log-files")["files"]
            except OSError:
                time.sleep(0.25)
        assert files is not None, server.stderr.read().decode() if server.poll() is not None else "no answer"
        assert [f["task"] for f in files] == ["s3gym/trust"]
        log = _get(f"http://127.0.0.1:{port}/api/logs/{urllib.parse.quote(files[0]['name'], safe='')}")
        assert log["eval"]["task_id"] == run_id and len(log["samples"]) == 6
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def secret_db(tmp_path) -> tuple[Path, str]:
    """A run whose note, model argument, api base, prompt and reply hold SECRET, stored before SECRET
    was a secret (so the store keeps it and only the export can redact it)."""
    path = tmp_path / "s.db"
    with Store(path) as store:
        run = store.runs.create_run(RunConfig(model="openai/gpt-4.1", game="trust", api_base=f"http://u:{SECRET}@127.0.0.1:9/v1",
                                         model_args={"user": SECRET, "extra_headers": {"X-Trace": SECRET}}),
                               note=f"key {SECRET}")
        store.episodes.add_episode(Episode(id="ep", run_id=run.id, game="trust", mode="explore", phase="explore", seed=0,
                                  index=0, model="openai/gpt-4.1", pathway="none"))
        prompt = json.dumps([{"role": "system", "content": "play"}, {"role": "user", "content": f"key {SECRET}"}])
        store.episodes.add_steps([Step(episode_id="ep", index=i, observation=f"o {SECRET}", prompt=prompt,
                              reply=f"Answer: collaborate {SECRET}", action="collaborate", self_score=1.0,
                              reward=2.0, feedback=f"ok {SECRET}", valid=True, terminated=i == 1, truncated=False)
                         for i in range(2)])
        store.episodes.finish_episode("ep", score=4.0)
    assert SECRET in Path(path).read_bytes().decode("utf-8", "replace") + _wal(path)  # stored as it was
    return path, run.id


def _wal(path: Path) -> str:
    wal = Path(f"{path}-wal")
    return wal.read_bytes().decode("utf-8", "replace") if wal.exists() else ""


def _log_text(path: Path) -> str:
    """Every member of a .eval file (a zip) decompressed."""
    with zipfile.ZipFile(path) as archive:
        return "\n".join(archive.read(name).decode("utf-8", "replace") for name in archive.namelist())


def test_secret_values_never_reach_the_log(secret_db, tmp_path, capsys, monkeypatch):
    path, run_id = secret_db
    monkeypatch.setenv("S3GYM_INSPECT_TEST_API_KEY", SECRET)
    code, printed = _export(capsys, run_id, path, "-f", "inspect", "-o", str(tmp_path / "run.eval"))
    assert code == 0, printed
    text = _log_text(tmp_path / "run.eval")
    assert SECRET not in text and SECRET not in printed
    assert "[redacted]" in text and "Answer: collaborate" in text  # redacted, not dropped
    log = read_eval_log(str(tmp_path / "run.eval"), resolve_attachments=True)
    assert log.eval.model_args["user"] == "[redacted]" and "127.0.0.1:9/v1" in log.eval.model_base_url


@pytest.mark.parametrize("case", ["no file", "not .eval", "a folder", "the database", "full prompts",
                                  "no inspect_ai"])
def test_refusals_are_one_line_and_write_nothing(secret_db, tmp_path, capsys, monkeypatch, case):
    path, run_id = secret_db
    args = {"no file": ["-f", "inspect"],
            "not .eval": ["-f", "inspect", "-o", str(tmp_path / "run.json")],
            "a folder": ["-f", "inspect", "-o", str(tmp_path)],
            "the database": ["-f", "inspect", "-o", str(path)],
            "full prompts": ["-f", "inspect", "--full-prompts", "-o", str(tmp_path / "run.eval")],
            "no inspect_ai": ["-f", "inspect", "-o", str(tmp_path / "run.eval")]}[case]
    if case == "no inspect_ai":
        monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # import fails as if not installed
    names = set(os.listdir(tmp_path))
    database = path.read_bytes()
    code, printed = _export(capsys, run_id, path, *args)
    assert code == 2
    assert len(printed.strip().splitlines()) == 1 and "Traceback" not in printed, printed
    if case == "no inspect_ai":
        assert "s3gym[inspect]" in printed
    assert set(os.listdir(tmp_path)) - names <= {"s.db-wal", "s.db-shm"}  # nothing written, no temporary
    assert path.read_bytes() == database
