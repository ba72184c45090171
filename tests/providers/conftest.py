"""Fixtures for the built-in provider tests: litellm offline, our providers registered, playable games."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported

import inspect

import pytest


def pytest_collection_modifyitems(items):
    """One event loop for all async provider tests: litellm's logging worker binds to the first loop
    it sees and warns ("LoggingWorker: event loop changed") on every new one."""
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here) and inspect.iscoroutinefunction(getattr(item, "obj", None)):
            item.add_marker(pytest.mark.asyncio(loop_scope="session"))

@pytest.fixture(scope="session")
def litellm_mod():
    import litellm

    from s3gym_tui import providers

    litellm.suppress_debug_info = True
    providers.register()
    return litellm


@pytest.fixture(autouse=True)
def _fresh_faults():
    from s3gym_tui.providers import fault

    fault.reset()
    yield
    fault.reset()


@pytest.fixture(scope="session")
def local_handler(litellm_mod):
    """The embedded model's handler (needs the `local` extra, which the dev venv has)."""
    from s3gym_tui.providers import local

    return local.HANDLER
