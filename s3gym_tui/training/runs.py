"""Where a training's files live (adapters, exports, trainer checkpoints, the manifest any process
reads to serve `trained/<id>/<x>`), training ids and model strings (a training's evaluation runs: evaluate.py)."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from s3gym_tui.models import Run

ROOT_ENV = "S3GYM_TRAINING_DIR"
MANIFEST = "manifest.json"


def new_training_id(label: str) -> str:
    """'<label>-<8 hex>', e.g. trust-sft-1a2b3c4d."""
    return f"{label}-{secrets.token_hex(4)}"


REPAIR_SUFFIX = "/repair"  # trained/<id>/<x>/repair: replies breaking the answer contract are repaired
GRAMMAR_SUFFIX = "/grammar"  # trained/<id>/<x>/grammar: every action reply constrained from its first token
# how a checkpoint's action replies are decoded: as the model writes them, constrained to the game's
# grammar from the first token (the base under the same constraint: the baseline of a format gain),
# or written freely and regenerated under the grammar when they break the contract
DECODINGS: tuple[str, ...] = ("free", "grammar", "repair")
_SUFFIX = {"free": "", "grammar": GRAMMAR_SUFFIX, "repair": REPAIR_SUFFIX}


def served_model(training_id: str, x: int, repair: bool = False, decoding: str = "free") -> str:
    """The litellm model string of checkpoint x (0 = the base model) of a local training, decoded as
    `decoding` (free, grammar or repair; `repair=True` is decoding 'repair')."""
    return f"trained/{training_id}/{x}" + _SUFFIX["repair" if repair else decoding]


def model_decoding(model: str) -> str:
    """free, grammar or repair: how a model string's action replies are decoded (free for any model
    that is not a locally served checkpoint)."""
    if model.startswith("trained/"):
        for decoding, suffix in _SUFFIX.items():
            if suffix and model.endswith(suffix):
                return decoding
    return "free"


def decoded_model(model: str, decoding: str) -> str:
    """The variant of a served checkpoint decoded as `decoding` (only local `trained/` models have them)."""
    if decoding not in _SUFFIX:
        raise ValueError(f"unknown decoding {decoding!r}: {', '.join(DECODINGS)}")
    plain = model[:len(model) - len(_SUFFIX[model_decoding(model)])] if model_decoding(model) != "free" else model
    if decoding != "free" and not plain.startswith("trained/"):
        done = {"repair": "repaired", "grammar": "constrained to the grammar"}[decoding]
        raise ValueError(f"{model} is not served locally: only trained/<id>/<x> replies can be {done}")
    return plain + _SUFFIX[decoding]


def repaired_model(model: str) -> str:
    """The repairing variant of a served checkpoint (only local `trained/` models can be repaired)."""
    return decoded_model(model, "repair")


def run_decoding(run: Run) -> str:
    """How an evaluation run's checkpoints decode their action replies (free, grammar or repair)."""
    return model_decoding(run.config.model)


def is_repair_run(run: Run) -> bool:
    """An evaluation run whose replies were repaired when they broke the answer contract."""
    return run_decoding(run) == "repair"


def serving_path(model: str) -> str:
    """How a model string is served, in words (the matrix and the training report name it)."""
    provider = model.split("/", 1)[0] if "/" in model else model
    if provider == "trained":
        extra = {"free": "", "grammar": ", grammar-constrained", "repair": ", repaired"}[model_decoding(model)]
        return "transformers (fp32 base + LoRA)" + extra
    if provider == "local":
        return "llama.cpp (GGUF)"
    return provider


def training_root() -> Path:
    """Where local trainings keep their files: $S3GYM_TRAINING_DIR, else the user data dir."""
    override = os.environ.get(ROOT_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    import platformdirs

    return platformdirs.user_data_path("s3gym", appauthor=False) / "training"


def write_manifest(directory: Path, training_id: str, base_dir: Path, adapters: dict[int, Path]) -> Path:
    """The file the `trained` provider reads to serve `trained/<training_id>/<x>` in any process, and
    what another machine needs to know of the base (hub id, revision, how the local copy was made)."""
    path = Path(directory) / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    from s3gym_tui.training.provenance import base_info

    data = {"training_id": training_id, "base_dir": str(Path(base_dir).resolve()),
            "adapters": {str(k): str(Path(v).resolve()) for k, v in sorted(adapters.items())},
            # the original model (hub id, revision) and how the local base was made: provenance.py
            "base": base_info(Path(base_dir))}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


def read_manifest(path: Path) -> tuple[Path, dict[int, Path]]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return Path(data["base_dir"]), {int(k): Path(v) for k, v in data.get("adapters", {}).items()}
