"""cpu_threads: the cores this process may use, shared with a launcher's siblings, capped by OMP_NUM_THREADS."""

import os

import pytest

from s3gym_tui.threads import cpu_threads


@pytest.fixture
def four_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)


def test_every_core_up_to_the_cap(four_cores):
    assert cpu_threads() == 4 and cpu_threads(2) == 2


def test_a_launchers_siblings_share_the_cores(four_cores, monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert cpu_threads() == 2
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert cpu_threads() == 1  # never 0


@pytest.mark.parametrize("limit, expected", [("1", 1), ("3", 3), ("16", 4), ("0", 4), ("", 4), ("two", 4)])
def test_an_explicit_omp_num_threads_caps_it(four_cores, monkeypatch, limit, expected):
    monkeypatch.setenv("OMP_NUM_THREADS", limit)
    assert cpu_threads() == expected


def test_a_local_models_threads_follow_it(four_cores, monkeypatch):
    from s3gym_tui.providers import local

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    handler = local.LocalLLM()
    assert (handler.n_threads, handler.n_threads_batch) == (1, 1)
    monkeypatch.delenv("OMP_NUM_THREADS")
    handler = local.LocalLLM()
    assert (handler.n_threads, handler.n_threads_batch) == (local.N_THREADS, 4)
