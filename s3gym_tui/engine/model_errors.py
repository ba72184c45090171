"""The error of a model that cannot be reached: its own module, so that the budget limits
(engine.limits) and the model client (engine.llm) both name it without importing each other."""

from __future__ import annotations


class ModelUnavailable(RuntimeError):
    """The model could not be reached (after retries) or refused the request. One-line message."""
