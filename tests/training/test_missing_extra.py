"""Without the optional train extra: `s3gym train` says how to install it (one line, exit 2, nothing
written) and everything else keeps working. The missing extra is simulated by blocking the imports."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from s3gym_tui.cli import main
from s3gym_tui.models import RunConfig
from s3gym_tui.training import EXTRA_MODULES, INSTALL_HINT, MissingExtra, require_extra

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_extra(monkeypatch):
    for name in EXTRA_MODULES:
        monkeypatch.setitem(sys.modules, name, None)  # `import torch` now raises ImportError


def test_require_extra_names_the_install_command(no_extra):
    with pytest.raises(MissingExtra) as caught:
        require_extra()
    message = str(caught.value)
    assert INSTALL_HINT == 'pip install torch==2.13.0 -e ".[train]"' and INSTALL_HINT in message
    assert "\n" not in message and "torch" in message


def test_s3gym_train_prints_one_line_exits_2_and_writes_nothing(no_extra, tmp_path, capsys):
    from s3gym_tui.store import Store

    db = tmp_path / "m.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
    code = main(["train", run.id, "--db", str(db)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and INSTALL_HINT in lines[0] and "Traceback" not in err
    with Store(db) as store:
        assert store.datasets.list() == [] and len(store.runs.list_runs()) == 1
    assert not (tmp_path / "training").exists()


BLOCKED_APP = textwrap.dedent('''
    import importlib.abc, os, sys
    BLOCK = {"torch", "transformers", "peft", "trl", "datasets", "accelerate"}

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCK:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    db = sys.argv[1]

    from s3gym_tui.app import S3GymApp  # the app still imports
    from s3gym_tui.cli import main
    import s3gym_tui.training.pipeline, s3gym_tui.training.console, s3gym_tui.training.evaluate  # noqa: F401
    assert main(["games"]) == 0
    assert main(["run", "trust", "-m", "scripted/trust", "--episodes", "1", "--eval-episodes", "1", "--db", db]) == 0
    from s3gym_tui.store import Store
    run_id = Store(db).runs.list_runs()[0].id
    assert main(["train", run_id, "--db", db]) == 2
    assert main(["train", run_id, "--backend", "remote", "--db", db]) == 2  # asks for --remote-model instead
    assert main(["train", run_id, "--method", "grpo", "--db", db]) == 2
    assert main(["distill", "a", "b", "--db", db]) == 2
    out = os.path.join(os.path.dirname(db), "jsonl")
    assert main(["dataset", run_id, "-o", out, "--db", db]) == 0  # the JSONL needs no extra (lengths do)
    assert len(os.listdir(out)) == 2
    assert main(["dataset", run_id, "-o", out, "--max-length", "100", "--db", db]) == 2
    assert main(["matrix", "--db", db]) == 2 and main(["trainings", "--db", db]) == 0

    import litellm
    from pathlib import Path
    from s3gym_tui import providers
    from s3gym_tui.training import serve
    providers.register()
    assert {e["provider"] for e in litellm.custom_provider_map} >= {"local", "scripted", "fault", "trained"}
    serve.HANDLER.add_training("t1", Path("/nonexistent"), {1: Path("/nonexistent/a")})
    try:
        litellm.completion(model="trained/t1/1", messages=[{"role": "user", "content": "hi"}])
    except Exception as exc:
        print("SERVE-ERROR", " ".join(str(exc).split()))
    assert not any(name.split(".")[0] in {"torch", "transformers"} for name in sys.modules if sys.modules[name])
    print("ALL-OK")
''')


def test_nothing_else_breaks_without_the_extra(tmp_path):
    proc = subprocess.run([sys.executable, "-c", BLOCKED_APP, str(tmp_path / "b.db")], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ALL-OK" in proc.stdout
    assert INSTALL_HINT in proc.stderr and "--remote-model" in proc.stderr
    serve_error = next(line for line in proc.stdout.splitlines() if line.startswith("SERVE-ERROR"))
    assert INSTALL_HINT in serve_error


def test_the_training_package_imports_no_textual():
    """Training is core (no UI): every module imports with Textual blocked."""
    code = ("import sys; sys.modules['textual'] = None\n"
            "import s3gym_tui.training.dataset, s3gym_tui.training.backend, s3gym_tui.training.serve, "
            "s3gym_tui.training.evaluate, s3gym_tui.training.pipeline, s3gym_tui.training.remote, "
            "s3gym_tui.training.runs, s3gym_tui.training.view, s3gym_tui.training.console, "
            "s3gym_tui.training.grammar, s3gym_tui.training.decoding, s3gym_tui.training.grpo, "
            "s3gym_tui.training.onpolicy, s3gym_tui.training.distill, s3gym_tui.training.matrix, "
            "s3gym_games.trl_env, s3gym_tui.training.rewards, s3gym_tui.training.rollouts\n"
            "assert 'textual' not in {m.split('.')[0] for m in sys.modules if sys.modules[m] is not None}")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
