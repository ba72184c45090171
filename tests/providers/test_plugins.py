"""The providers package never imports the training package (no upward import, no cycle): the trained
models are a plugin declared by name in s3gym_tui.plugins, loaded on register(); other plugins can be
added the same way."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from litellm import CustomLLM

from s3gym_tui import plugins, providers

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_no_module_of_the_providers_package_imports_training():
    folder = ROOT / "s3gym_tui" / "providers"
    for path in folder.glob("*.py"):
        found = {n for n in _imports(path) if n.startswith("s3gym_tui.training") or n == "s3gym_tui.training"}
        assert not found, f"{path.name} imports {found}"
        assert "s3gym_tui.training" not in path.read_text(encoding="utf-8"), path.name
    assert not any(n.startswith("s3gym_tui.training") for n in _imports(ROOT / "s3gym_tui" / "plugins.py"))


def test_the_trained_plugin_is_declared_by_name():
    plugin = plugins.find("trained")
    assert plugin.target == "s3gym_tui.training.serve:HANDLER"
    assert plugin.accepts("trust-sft-1a2b/3") and not plugin.accepts("x") and not plugin.accepts("a/b")
    assert "trained" in providers.PROVIDERS


def test_a_plugin_added_at_run_time_is_registered(litellm_mod, monkeypatch):
    class Echo(CustomLLM):
        def completion(self, model, messages, *args, model_response=None, **kwargs):
            from s3gym_tui.providers._common import build_response

            return build_response(model_response, f"echo/{model}", "Answer: cheat, Score: 1", prompt_tokens=1,
                                  completion_tokens=1)

    import types

    monkeypatch.setattr(litellm_mod, "custom_provider_map", list(litellm_mod.custom_provider_map))  # restored after
    module = types.ModuleType("s3gym_echo_plugin")
    module.HANDLER = Echo()
    monkeypatch.setitem(sys.modules, "s3gym_echo_plugin", module)
    monkeypatch.setitem(plugins._PLUGINS, "echo", plugins.ProviderPlugin("echo", "s3gym_echo_plugin:HANDLER", r"\w+"))
    assert providers.is_builtin("echo/abc") and not providers.is_builtin("echo/a-b")
    providers.register()
    handlers = {e["provider"]: e["custom_handler"] for e in litellm_mod.custom_provider_map}
    assert handlers["echo"] is module.HANDLER
    reply = litellm_mod.completion(model="echo/x", messages=[{"role": "user", "content": "go"}])
    assert reply.choices[0].message.content == "Answer: cheat, Score: 1"


BLOCK_TRAINING = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "s3gym_tui.training" or name.startswith("s3gym_tui.training."):
            raise ImportError("blocked for the test: " + name)
sys.meta_path.insert(0, Block())
import litellm
from s3gym_tui import providers
providers.register()
names = sorted(e["provider"] for e in litellm.custom_provider_map)
assert names == ["fault", "learner", "local", "scripted"], names
assert not any(m.startswith("s3gym_tui.training") for m in sys.modules)
print("ok")
"""


def test_without_the_training_package_the_other_providers_still_register():
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", BLOCK_TRAINING], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
