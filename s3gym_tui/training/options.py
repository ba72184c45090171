"""What `--vllm MODE` needs of the processes (torch-free): the recipes themselves are training/config.py."""

from __future__ import annotations

from typing import Optional

VLLM_MODES: tuple[str, ...] = ("server", "colocate")


def vllm_problem(mode: Optional[str], level: str = "step", processes: int = 1) -> Optional[str]:
    """Why `--vllm MODE` cannot be used here (one line), or None. Checked before anything is stored.
    A server across processes is refused: TRL's server-mode generate is a collective call under one
    set of sampling settings, while each rank's episodes take a different number of turns (episode
    level) and each state has its own answer-line grammar (both levels; vllm_sampling.py)."""
    if mode is None:
        return None
    if mode not in VLLM_MODES:
        return f"unknown --vllm mode {mode!r}: server or colocate (TRL's vLLM modes)"
    if mode == "server" and processes > 1:
        if level == "episode":
            return ("--level episode with --vllm server trains in one process (each rank's episodes take a different "
                    "number of turns, and TRL's server calls wait for every rank): use --vllm colocate, or one "
                    "process")
        return ("--vllm server trains in one process (TRL's server call gathers every rank's prompts under one "
                "answer-line regex, and each state has its own grammar): use --vllm colocate, or one process")
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return (f"--vllm {mode} needs vLLM, which is not installed (pip install vllm, a version TRL supports, "
                f"on a machine with a GPU); without --vllm, GRPO generates with transformers")
    return None
