"""The learner behind litellm's custom-provider path (`learner/<game>`), like the scripted players."""

from __future__ import annotations

from typing import Any

from litellm import CustomLLM
from litellm.types.utils import ModelResponse

import s3gym_games as games
from s3gym_tui.providers._common import bad_request, build_response, estimate_tokens, prompt_text
from s3gym_tui.providers.learner import PROVIDER, PromptError, reply


class LearnerLLM(CustomLLM):
    """litellm custom provider `learner`: reads only the messages (the s3gym context is not used)."""

    provider = PROVIDER

    def _respond(self, model: str, messages: list, model_response: ModelResponse | None) -> ModelResponse:
        try:
            game = games.canonical(model)
        except games.GameError as exc:
            raise bad_request(str(exc), f"{PROVIDER}/{model}", PROVIDER) from None
        try:
            content = reply(game, messages)
        except (PromptError, ValueError) as exc:
            raise bad_request(f"{PROVIDER}/{game}: {exc}", f"{PROVIDER}/{game}", PROVIDER) from None
        return build_response(model_response, f"{PROVIDER}/{game}", content,
                              prompt_tokens=estimate_tokens(prompt_text(messages)),
                              completion_tokens=estimate_tokens(content))

    def completion(self, model: str, messages: list, *args: Any, model_response: ModelResponse | None = None,
                   **kwargs: Any) -> ModelResponse:
        return self._respond(model, messages, model_response)

    async def acompletion(self, model: str, messages: list, *args: Any, model_response: ModelResponse | None = None,
                          **kwargs: Any) -> ModelResponse:
        return self._respond(model, messages, model_response)
