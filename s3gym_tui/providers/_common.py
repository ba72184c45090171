"""Helpers shared by the built-in litellm providers: the s3gym context channel, prompts, responses, errors."""

from __future__ import annotations

import time
from typing import Any, Mapping

import litellm
from litellm.types.utils import Choices, Message, ModelResponse, Usage

CONTEXT_KEY = "s3gym"
TASKS = ("act", "summary", "pi")  # pi: write privileged information (engine/credit_pi.py)


def s3gym_context(optional_params: Mapping[str, Any] | None, kwargs: Mapping[str, Any] | None = None) -> dict | None:
    """Find the s3gym context dict a built-in model was called with, or None.

    The engine sends it as `litellm.acompletion(..., extra_body={"s3gym": ctx})`. With litellm 1.110.2 a
    custom provider receives it as `optional_params["extra_body"]["s3gym"]` (extra_body is passed through
    untouched); a caller that passes `s3gym=ctx` as a plain keyword lands in `optional_params["s3gym"]`.
    Both are accepted, as are the same two shapes inside `kwargs` / `kwargs["litellm_params"]["metadata"]`.
    """
    places: list[Mapping[str, Any]] = []
    for source in (optional_params, kwargs):
        if not isinstance(source, Mapping):
            continue
        extra = source.get("extra_body")
        if isinstance(extra, Mapping):
            places.append(extra)
        places.append(source)
    if isinstance(kwargs, Mapping):
        lp = kwargs.get("litellm_params")
        meta = lp.get("metadata") if isinstance(lp, Mapping) else None
        if isinstance(meta, Mapping):
            places.append(meta)
    for place in places:
        ctx = place.get(CONTEXT_KEY)
        if isinstance(ctx, Mapping):
            return dict(ctx)
    return None


def content_text(content: Any) -> str:
    """The text of one message's content (a string or a list of OpenAI-style parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                if part.get("type", "text") == "text":
                    parts.append(str(part.get("text", "")))
            else:
                parts.append(str(part))
        return "".join(parts)
    return str(content)


def prompt_text(messages: list) -> str:
    """All message texts joined (what the scripted providers read and count)."""
    return "\n".join(content_text(m.get("content") if isinstance(m, Mapping) else m) for m in messages or [])


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (4 characters a token), at least 1 for non-empty text."""
    return max(1, (len(text) + 3) // 4) if text else 0


def build_response(model_response: ModelResponse | None, model: str, content: str, *, prompt_tokens: int,
                   completion_tokens: int, finish_reason: str = "stop", extra: Mapping[str, Any] | None = None,
                   cached_tokens: int | None = None) -> ModelResponse:
    """Fill litellm's ModelResponse with one assistant message, usage and its cost ($0), and s3gym facts in
    _hidden_params.
    `cached_tokens`: prompt tokens not computed again (reported as OpenAI does; None: not said)."""
    response = model_response if model_response is not None else ModelResponse()
    if not response.choices:
        response.choices = [Choices(index=0, message=Message(role="assistant", content=content))]
    response.choices[0].message.content = content
    response.choices[0].finish_reason = finish_reason
    response.created = int(time.time())
    response.model = model
    details = {"cached_tokens": int(cached_tokens)} if cached_tokens is not None else None
    response.usage = Usage(prompt_tokens=int(prompt_tokens), completion_tokens=int(completion_tokens),
                           total_tokens=int(prompt_tokens) + int(completion_tokens), prompt_tokens_details=details)
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict):
        # the price litellm would compute from the $0 entries register() makes (these models run on
        # this machine): stamped, litellm takes it instead of pricing every response again
        hidden["response_cost"] = 0.0
        if extra:
            hidden[CONTEXT_KEY] = dict(extra)
    return response


def bad_request(message: str, model: str, provider: str) -> litellm.BadRequestError:
    """A non-retryable caller error, as litellm raises it for a bad request."""
    return litellm.BadRequestError(message=message, model=model, llm_provider=provider)


def require_context(optional_params: Mapping[str, Any] | None, kwargs: Mapping[str, Any], model: str,
                    provider: str) -> dict:
    """The s3gym context, or a BadRequestError saying how to send it."""
    ctx = s3gym_context(optional_params, kwargs)
    if ctx is None:
        raise bad_request(f"{provider}/{model} needs the s3gym context: call with extra_body={{'s3gym': ctx}}",
                          f"{provider}/{model}", provider)
    task = ctx.get("task", "act")
    if task not in TASKS:
        raise bad_request(f"unknown s3gym task {task!r}: choose one of {', '.join(TASKS)}",
                          f"{provider}/{model}", provider)
    ctx["task"] = task
    ctx["actions"] = [str(a) for a in (ctx.get("actions") or [])]
    ctx["seed"] = int(ctx.get("seed") or 0)
    ctx["mode"] = str(ctx.get("mode") or "explore")
    return ctx
