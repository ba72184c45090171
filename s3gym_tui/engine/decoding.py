"""Constrained decoding on request (`--decoding grammar`): the game's action grammar in each model
server's own form, and the provider arguments a person passes through (`--model-arg KEY=VALUE`).

The grammar is the reply contract `Answer: <action>, Score: <number>` with the game's action rule
for the current state (games' `action_grammar()`, GBNF): the embedded model gets the same one. A
server that only takes `response_format` gets a JSON schema of the contract instead (s3gym_games.reply
reads `{"answer": ..., "score": ...}` replies)."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Optional

from s3gym_tui.models import ModelArgError, RESERVED_ARGS, check_arg_name, unstorable_number  # noqa: F401 (re-exported)
from s3gym_tui.secrets import REDACTED, SECRET_NAME, redact_values

DECODINGS: tuple[str, ...] = ("free", "grammar")

SCORE_RULE = '"-"? [0-9] [0-9]? ("." [0-9])?'
FALLBACK_ACTION_RULE = '[^\\n,] [^\\n,]{0,59}'

# JSON schema of the reply contract, for servers that only constrain through `response_format`
REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 200}, "score": {"type": "number"}},
    "required": ["answer", "score"],
    "additionalProperties": False,
}

# The forms a server takes a grammar in (the request field, how it is shown). vLLM >= 0.12 takes
# `structured_outputs` only (the `guided_*` fields were removed); older ones `guided_grammar`.
FORM_NAMES = {"grammar": "GBNF grammar (`grammar`)", "structured_outputs": "grammar (`structured_outputs`)",
              "guided_grammar": "grammar (`guided_grammar`)", "ebnf": "grammar (SGLang `ebnf`)",
              "json_schema": "JSON schema (`response_format`)"}
# Server kinds (engine.servers) and the form each takes a grammar in (any other kind: a JSON schema)
FORM_OF_KIND = {"llama.cpp": "grammar", "llama-cpp-python": "grammar", "vllm": "structured_outputs",
                "vllm-legacy": "guided_grammar", "sglang": "ebnf"}
# When a server refuses a form, the next one tried: the llama.cpp family's `grammar` first (a server
# that refuses a JSON schema is most often llama-cpp-python's), then the OpenAI standard, then the rest
FALLBACK_ORDER = ("grammar", "json_schema", "structured_outputs", "guided_grammar", "ebnf")
# what a refusal of each form names: the field it was sent in
_FORM_WORDS = {form: re.compile(rf"(?<![A-Za-z_]){form}(?![A-Za-z_])") for form in FORM_NAMES}
_FORM_WORDS["json_schema"] = re.compile(r"(?<![A-Za-z_])(?:json_schema|response_format)(?![A-Za-z_])")


def act_grammar(action_rule: Optional[str]) -> str:
    """The full GBNF of an action reply: `Answer: <action>, Score: <number>` and nothing else."""
    rule = (action_rule or "").strip() or FALLBACK_ACTION_RULE
    return f'root ::= "Answer: " action ", Score: " score\naction ::= {rule}\nscore ::= {SCORE_RULE}\n'


def form_of(kind: str) -> str:
    """The grammar form a server of `kind` is sent first."""
    return FORM_OF_KIND.get(kind, "json_schema")


def grammar_form(kind: str, form: Optional[str] = None) -> str:
    """How a server of `kind` is asked for constrained decoding (`form`: one it taught instead of
    its kind's), as shown and recorded."""
    form = form or form_of(kind)
    if form == "grammar" and kind in ("llama.cpp", "llama-cpp-python"):
        return f"GBNF grammar ({kind} `grammar`)"
    if form in ("structured_outputs", "guided_grammar") and kind in ("vllm", "vllm-legacy"):
        return f"grammar (vLLM `{form}`)"
    return FORM_NAMES[form]


def form_params(form: str, action_rule: Optional[str]) -> dict[str, Any]:
    """The litellm keyword arguments that constrain one action reply in `form`."""
    grammar = act_grammar(action_rule)
    if form == "structured_outputs":
        return {"extra_body": {"structured_outputs": {"grammar": grammar}}}
    if form in ("grammar", "guided_grammar", "ebnf"):
        return {"extra_body": {form: grammar}}
    return {"response_format": {"type": "json_schema",
                                "json_schema": {"name": "reply", "strict": True, "schema": REPLY_SCHEMA}}}


def constrained_params(kind: str, action_rule: Optional[str]) -> dict[str, Any]:
    """The litellm keyword arguments that constrain one action reply on a server of `kind`."""
    return form_params(form_of(kind), action_rule)


def refused(form: str, error: str) -> bool:
    """True when a server's error names the field `form` was sent in (its way of refusing it)."""
    return bool(_FORM_WORDS[form].search(error or ""))


def next_form(tried: set[str] | frozenset[str]) -> Optional[str]:
    """The form to send after a refusal, given the forms already tried (None: every one was)."""
    return next((form for form in FALLBACK_ORDER if form not in tried), None)


def merge_params(kwargs: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`kwargs` with `extra` added; two `extra_body` dicts are merged (extra's keys win)."""
    out = dict(kwargs)
    for key, value in extra.items():
        if key == "extra_body" and isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


# ----- model arguments ------------------------------------------------------------------------
_SECRET_ARG = re.compile(r"auth|bearer|cookie|passw|credential|secret|token$|key$|api_?key",
                         re.IGNORECASE)


def parse_value(text: str) -> Any:
    """A model argument's value: JSON when it reads as JSON (numbers, true/false, null, lists,
    objects), else the text as it is."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_model_args(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`KEY=VALUE` strings as a dict (a later key wins). Raises ModelArgError."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise ModelArgError(f"--model-arg {item!r}: write KEY=VALUE, e.g. top_p=0.9")
        check_arg_name(key)
        out[key] = parse_value(value.strip())
        problem = unstorable_number(out[key])
        if problem:
            raise ModelArgError(f"--model-arg {key}: {problem}")
    return out


def looks_secret(key: str) -> bool:
    """A provider argument whose value is a credential (api_key, extra_headers' Authorization, ...)."""
    return bool(SECRET_NAME.search(key) or _SECRET_ARG.search(key))


def storable_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """The model arguments as stored and shown: keys that look like secrets dropped (also inside
    nested dicts, e.g. extra_headers), secret values (set in the environment) redacted."""
    def clean(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): clean(v) for k, v in value.items() if not looks_secret(str(k))}
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, str):
            return redact_values(value)
        return value

    return {str(k): clean(v) for k, v in args.items() if not looks_secret(str(k))}


def secret_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """What storable_args leaves out (kept in memory for this process only)."""
    kept = storable_args(args)
    return {k: v for k, v in args.items() if kept.get(k, REDACTED + "?") != v}


def describe_args(args: Mapping[str, Any]) -> str:
    """`key=value, ...` of the storable arguments (for a line in the CLI or the app)."""
    shown = storable_args(args)
    return ", ".join(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in shown.items())


def with_runtime_args(config: Any, args: Mapping[str, Any]) -> Any:
    """A RunConfig with `args` (given in this process: secrets are never stored) over its stored ones."""
    if not args:
        return config
    return config.model_copy(update={"model_args": {**config.model_args, **dict(args)}})
