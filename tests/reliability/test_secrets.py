"""Secrets: API keys planted in the environment never reach the database (its file, WAL and shared
memory bytes), exports, the CLI's output or the app's screenshots, even when a provider echoes the
key back in its error (as OpenAI's 401 does, partly masked; a local stand-in echoes it whole)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import uuid
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.llm import CallSettings, ModelUnavailable, complete, redact
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store


ROOT = Path(__file__).resolve().parents[2]
CANARIES = {
    "OPENAI_API_KEY": f"sk-canary-{uuid.uuid4().hex}",
    "ANTHROPIC_API_KEY": f"sk-ant-canary-{uuid.uuid4().hex}",
    "GEMINI_API_KEY": f"gm-canary-{uuid.uuid4().hex}",
    "S3GYM_TEST_TOKEN": f"tok-canary-{uuid.uuid4().hex}",
}
TINY = ["--episodes", "2", "--eval-every", "2", "--eval-episodes", "1"]


class EchoServer(ThreadingHTTPServer):
    """A provider that answers every request with `status` and an error echoing the key it got."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), EchoHandler)
        self.status = 401
        self.seen: list[str] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class EchoHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        key = self.headers.get("authorization") or self.headers.get("x-api-key") or ""
        if self.path.rstrip("/").endswith(("/completions", "/messages")):  # model calls, not context probes
            self.server.seen.append(key)
        bare = key.split()[-1] if key else ""
        body = json.dumps({"error": {
            "message": f"Incorrect API key provided: {key}. You passed {bare[:12]}****{bare[-4:]} "
                       f"(header authorization={key}).",
            "type": "invalid_request_error", "code": "invalid_api_key"}}).encode()
        self.send_response(self.server.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def echo_server():
    server = EchoServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)  # a quick shutdown
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def canary_env(monkeypatch):
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    return CANARIES


def leaks(data: bytes | str) -> list[str]:
    """Which canaries (or their distinctive middle part) occur in the data."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    found = []
    for name, value in CANARIES.items():
        secret = value.split("canary-")[1]
        if value in text or secret[:16] in text or secret[-16:] in text:
            found.append(name)
    return found


def database_bytes(path: Path) -> bytes:
    return b"".join(Path(f"{path}{suffix}").read_bytes() for suffix in ("", "-wal", "-shm")
                    if Path(f"{path}{suffix}").exists())


def test_a_provider_error_echoing_the_key_is_redacted(canary_env, echo_server):
    """Positive control first: litellm's own error carries the key; ours does not."""
    import litellm

    from s3gym_tui.engine.llm import _litellm

    _litellm()
    with pytest.raises(Exception) as raw:
        asyncio.run(litellm.acompletion(model="openai/gpt-4.1", api_base=echo_server.base,
                                        messages=[{"role": "user", "content": "hi"}], num_retries=0))
    assert "OPENAI_API_KEY" in leaks(str(raw.value))  # the key really comes back in the error
    for status in (401, 500, 429):
        echo_server.status = status
        for model, env in (("openai/gpt-4.1", "OPENAI_API_KEY"),
                           ("anthropic/claude-3-5-sonnet-20241022", "ANTHROPIC_API_KEY")):
            settings = CallSettings(model, api_base=echo_server.base, max_retries=1, backoff_base_s=0,
                                    timeout_s=10)
            with pytest.raises(ModelUnavailable) as err:
                asyncio.run(complete(settings, [{"role": "user", "content": "hi"}]))
            assert canary_env[env] in " ".join(echo_server.seen[-1:])  # the server got the real key
            assert not leaks(str(err.value)), (status, model, str(err.value))
            assert "[redacted]" in str(err.value)


def test_redact_covers_env_values_and_key_shapes(canary_env):
    for value in canary_env.values():
        assert redact(f"x {value} y") == "x [redacted] y"
    assert "sk-proj-ABCDEFGH" not in redact("key sk-proj-ABCDEFGH1234567890 was wrong")
    assert "abcdefgh12345678" not in redact('{"Authorization": "Bearer abcdefgh12345678"}')
    assert redact("plain error: connection refused (errno 111)") == "plain error: connection refused (errno 111)"


def test_no_key_in_database_exports_or_cli_output(canary_env, echo_server, tmp_path, capsys):
    db = tmp_path / "secrets.db"
    outputs = []
    for args in (["run", "trust", "-m", "openai/gpt-4.1", "--api-base", echo_server.base, *TINY],
                 ["run", "trust", "-m", "anthropic/claude-3-5-sonnet-20241022", "--api-base", echo_server.base,
                  *TINY],
                 ["run", "trust", "-m", "openai/gpt-4.1", "--api-base", "http://127.0.0.1:9", *TINY],
                 ["run", "trust", "-m", "scripted/trust", "-p", "summary", *TINY]):
        code = main([*args, "--db", str(db)])
        captured = capsys.readouterr()
        outputs.append(captured.out + captured.err)
        assert code == (0 if "scripted/trust" in args else 3), captured.err  # 3: the provider failed while working
    assert "[redacted]" in outputs[0] and "[redacted]" in outputs[1]
    assert len(echo_server.seen) >= 2 and all(leaks(k) for k in echo_server.seen)
    store = Store(db)
    for run in store.runs.list_runs():
        assert main(["resume", run.id, "--db", str(db)]) in (0, 2, 3)
        out = tmp_path / f"{run.id}.jsonl"
        assert main(["export", run.id, "-o", str(out), "--db", str(db)]) == 0
        outputs.append(out.read_text())
        for fmt in ("jsonl-dir", "parquet"):  # every file of the folder formats, Parquet read back as values
            folder = tmp_path / f"{run.id}-{fmt}"
            assert main(["export", run.id, "-f", fmt, "-o", str(folder), "--db", str(db)]) == 0
            outputs += [json.dumps(pq.read_table(p).to_pylist()) if p.suffix == ".parquet" else p.read_text()
                        for p in folder.iterdir()]
        log = tmp_path / f"{run.id}.eval"  # an Inspect log: a zip, read member by member
        assert main(["export", run.id, "-f", "inspect", "-o", str(log), "--db", str(db)]) == 0
        with zipfile.ZipFile(log) as archive:
            outputs += [archive.read(name).decode("utf-8", "replace") for name in archive.namelist()]
    for args in (["runs"], ["report"], ["audit"]):
        main([*args, "--db", str(db)])
    captured = capsys.readouterr()
    outputs.append(captured.out + captured.err)
    assert not [leaks(o) for o in outputs if leaks(o)]
    store.close()
    assert not leaks(database_bytes(db))


def test_no_key_in_a_real_cli_process_output(canary_env, echo_server, tmp_path):
    """The whole process, litellm's own logging included, with the keys in its environment."""
    env = {**os.environ, **CANARIES, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "DEBUG",
           "S3GYM_CONFIG": "/nonexistent/s3gym.toml"}
    db = tmp_path / "proc.db"
    proc = subprocess.run([sys.executable, "-m", "s3gym_tui", "run", "trust", "-m", "openai/gpt-4.1", "--api-base",
                           echo_server.base, *TINY, "--db", str(db)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3 and "[redacted]" in proc.stderr  # the provider refused while working
    assert echo_server.seen and leaks(echo_server.seen[0])
    assert not leaks(proc.stdout) and not leaks(proc.stderr), (proc.stdout[-500:], proc.stderr[-1000:])
    assert not leaks(database_bytes(db))


async def test_no_key_in_app_screenshots(canary_env, echo_server, tmp_path, settings):
    """The app runs a protocol on a provider that echoes the key: the error it shows is redacted."""
    from s3gym_tui.app import S3GymApp

    db = tmp_path / "app.db"
    with Store(db) as store:
        bad = store.runs.create_run(RunConfig(model="openai/gpt-4.1", api_base=echo_server.base, game="trust",
                                              explore_episodes=1, eval_episodes=1, max_retries=0))
    app = S3GymApp(db_path=db, settings=settings)
    shots = []
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        shots.append(app.export_screenshot())
        app.open_protocol(bad.id)
        await pilot.pause()
        await pilot.press("r")  # resumed as its own process (`s3gym resume`), after the dialog
        for _ in range(400):
            await pilot.pause(0.05)
            if type(app.screen).__name__ == "ResumeDialog":
                break
        await pilot.press("y")
        for _ in range(2400):
            await pilot.pause(0.05)
            if Store(db).runs.get_run(bad.id).status == "stopped" and not app.screen.running \
                    and any(n.severity == "error" for n in app._notifications):
                break
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        shots.append(app.export_screenshot())
        notes = " ".join(str(n.message) for n in app._notifications)
    assert Store(db).runs.get_run(bad.id).status == "stopped"
    assert echo_server.seen and leaks(echo_server.seen[0])  # the key did go out
    assert "redacted" in notes or "redacted" in shots[-1]  # the error is on screen
    assert not [leaks(s) for s in shots if leaks(s)] and not leaks(notes)
    assert not leaks(database_bytes(db))


@pytest.fixture
def settings():
    from s3gym_tui.config import Settings

    return Settings(default_model="scripted/trust", theme="dark", human_name="tester")
