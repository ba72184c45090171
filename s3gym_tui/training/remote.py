"""The remote training backend: a provider's fine-tuning API through litellm (upload the OpenAI-format
JSONL with `acreate_file`, start `acreate_fine_tuning_job`, poll `aretrieve_fine_tuning_job`).

litellm 1.110 supports this for openai, azure and vertex_ai. The result is one fine-tuned model (no
per-epoch checkpoints): the training run then has checkpoints at epoch 0 (the base) and the last epoch.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

FINE_TUNING_PROVIDERS: tuple[str, ...] = ("openai", "azure", "vertex_ai")
TERMINAL = ("succeeded", "failed", "cancelled")
POLL_S = 15.0  # seconds between status checks of a running job


class RemoteTrainingError(RuntimeError):
    """The remote job could not be started or did not succeed (one-line message)."""


@dataclass(frozen=True)
class RemoteResult:
    job_id: str
    file_id: str
    status: str
    base_model: str  # litellm string of the base, e.g. openai/gpt-4o-mini-2024-07-18
    fine_tuned_model: Optional[str]  # litellm string of the result, e.g. openai/ft:gpt-4o-mini:...
    trained_tokens: Optional[int] = None
    seconds: float = 0.0


def split_remote_model(model: str) -> tuple[str, str]:
    """('provider', 'model') of a litellm string; no provider means openai."""
    provider, sep, name = model.partition("/")
    provider, name = (provider, name) if sep else ("openai", provider)
    if provider not in FINE_TUNING_PROVIDERS:
        raise RemoteTrainingError(f"{provider!r} has no fine-tuning API in litellm: use one of "
                                  f"{', '.join(FINE_TUNING_PROVIDERS)} (e.g. openai/gpt-4o-mini-2024-07-18)")
    if not name:
        raise RemoteTrainingError("name the base model to fine-tune, e.g. --remote-model openai/gpt-4o-mini-2024-07-18")
    return provider, name


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


async def fine_tune_remote(jsonl: Path, model: str, *, epochs: int = 2, poll_s: Optional[float] = None,
                           timeout_s: float = 24 * 3600.0, suffix: str = "s3gym",
                           progress: Callable[[str, Any], None] = lambda status, job: None,
                           **provider_kwargs: Any) -> RemoteResult:
    """Upload `jsonl` (OpenAI `{"messages": [...]}` lines), fine-tune `model`, wait for the result."""
    from s3gym_tui.providers import configured_litellm

    litellm = configured_litellm()

    provider, name = split_remote_model(model)
    poll_s = POLL_S if poll_s is None else poll_s
    started = time.monotonic()
    try:
        with open(jsonl, "rb") as handle:
            uploaded = await litellm.acreate_file(file=handle, purpose="fine-tune", custom_llm_provider=provider,
                                                  **provider_kwargs)
        job = await litellm.acreate_fine_tuning_job(model=name, training_file=_field(uploaded, "id"),
                                                    hyperparameters={"n_epochs": int(epochs)}, suffix=suffix,
                                                    custom_llm_provider=provider, **provider_kwargs)
        job_id = _field(job, "id")
        status = str(_field(job, "status") or "queued")
        progress(status, job)
        while status not in TERMINAL:
            if time.monotonic() - started > timeout_s:
                raise RemoteTrainingError(f"fine-tuning job {job_id} still {status} after {timeout_s:.0f} s")
            await asyncio.sleep(poll_s)
            job = await litellm.aretrieve_fine_tuning_job(fine_tuning_job_id=job_id, custom_llm_provider=provider,
                                                          **provider_kwargs)
            status = str(_field(job, "status") or status)
            progress(status, job)
    except RemoteTrainingError:
        raise
    except Exception as exc:  # litellm raises its own exception types for auth, bad requests, outages
        raise RemoteTrainingError(f"{provider} fine-tuning: {' '.join(str(exc).split())[:300]}") from exc
    if status != "succeeded":
        error = _field(job, "error")
        detail = _field(error, "message") if error else None
        raise RemoteTrainingError(f"fine-tuning job {job_id} {status}" + (f": {detail}" if detail else ""))
    tuned = _field(job, "fine_tuned_model")
    return RemoteResult(job_id=job_id, file_id=_field(uploaded, "id"), status=status, base_model=f"{provider}/{name}",
                        fine_tuned_model=f"{provider}/{tuned}" if tuned else None,
                        trained_tokens=_field(job, "trained_tokens"), seconds=time.monotonic() - started)
