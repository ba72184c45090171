"""Records every request the scripted model provider receives, at the provider (what litellm hands
the model), in memory or as JSON lines in $S3GYM_RECORD_SENT (for runs in another process).

    python -c "import tests.engine.sent_recorder as r; r.install_from_env(); ..."
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Optional

from s3gym_tui.providers import s3gym_context
from s3gym_tui.providers.scripted import ScriptedLLM

ENV_VAR = "S3GYM_RECORD_SENT"


def request_key(ctx: dict) -> tuple:
    """What identifies an action request: the game state it was asked in."""
    return (ctx["game"], ctx["mode"], int(ctx["seed"]), tuple(ctx.get("actions", ())))


def install(sink: Callable[[dict], None]) -> Callable[[], None]:
    """Wrap ScriptedLLM so every request is passed to `sink` first; returns the undo function."""
    original = ScriptedLLM._respond

    def recording(self, model: str, messages: list, model_response: Any, optional_params: Optional[dict],
                  kwargs: dict) -> Any:
        ctx = s3gym_context(optional_params, kwargs) or {}
        sink({"task": ctx.get("task"), "key": list(request_key(ctx)) if ctx.get("task") == "act" else None,
              "prompt": json.dumps(messages, ensure_ascii=False)})
        return original(self, model, messages, model_response, optional_params, kwargs)

    ScriptedLLM._respond = recording

    def undo() -> None:
        ScriptedLLM._respond = original

    return undo


def install_from_env() -> None:
    path = os.environ[ENV_VAR]

    def sink(record: dict) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())

    install(sink)


def read(path: str | os.PathLike[str]) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
