"""A tiny OpenAI-compatible chat server on 127.0.0.1 for tests: configurable delay, reply, status,
headers and usage, so the real litellm HTTP path is exercised without a network. It counts the
requests it answered (`completed`) and the most it had in flight at once (`peak`).

    server = FakeOpenAI(delay_s=0.2).start()      # in a thread; server.base_url -> .../v1
    server.behave(status=429, headers={"Retry-After": "nan"}, times=1)
    ...
    server.stop()

It can also describe itself like a real server (`kind` llama.cpp: /props n_ctx; vllm / sglang:
/v1/models max_model_len and owned_by; ollama: /api/show; lmstudio: /api/v0/models;
llama-cpp-python: `python -m llama_cpp.server`'s /openapi.json title and /v1/models entries, no
/props, no context) with a `context` size, refuse a prompt plus max tokens over that context
(`enforce_context`, with the message vLLM and llama_cpp.server write), accept only the grammar
fields its kind understands (others: 400, like a strict server; llama-cpp-python ignores unknown
fields and refuses a `json_schema` response format with its own 500 and words) and record which it
received (`grammar_fields`), and die as a replica (`die()`, or `behave(die=True)`: the connection
drops, then nothing listens).

Prompt caching, simulated (`cache=`): "openai" caches every prompt automatically and reports the
longest prefix it saw before as `usage.prompt_tokens_details.cached_tokens` (at least
`cache_min` tokens, in steps of `cache_block`, as OpenAI does); "anthropic" reports
`cache_read_input_tokens` / `cache_creation_input_tokens` in the usage (an OpenAI-compatible proxy of
Anthropic), caching only up to the blocks marked with `cache_control`. POST .../v1/messages answers
in Anthropic's own Messages format with the same cache rules. Tokens are about four characters.

Connections: it counts the TCP connections it accepted (`connections`). By default it speaks
HTTP/1.0 and closes each connection after one answer; `keep_alive=True` speaks HTTP/1.1 and keeps
them open like vLLM's or llama.cpp's server, so a client that pools connections opens few. `GET
/_fake/stats` answers the counters as JSON (for a server in another process: `python -m
tests.fake_openai --keep-alive` prints its base URL).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

DEFAULT_REPLY = "I will cooperate.\nAnswer: C, Score: 1"


def _blocks(request: dict) -> list[tuple[str, bool]]:
    """The request's text as (text, marked with cache_control) blocks, in the order the model reads
    them: system (Anthropic's top-level `system` or system messages), then the messages' content."""
    out: list[tuple[str, bool]] = []

    def add(content: Any, marked: bool) -> None:
        if isinstance(content, list):
            for part in content:
                if isinstance(part, dict):
                    out.append((str(part.get("text", "")), bool(part.get("cache_control"))))
        elif content is not None:
            out.append((str(content), marked))

    add(request.get("system"), False)
    for message in request.get("messages", []):
        add(message.get("content"), bool(message.get("cache_control")))
    return out


def _tokens(text: str) -> int:
    return len(text) // 4


class PrefixCache:
    """What the fake remembers of earlier prompts, and how much of a new one it would find cached."""

    def __init__(self, style: str, minimum: int, block: int) -> None:
        self.style, self.minimum, self.block = style, minimum, block
        self.seen: list[str] = []  # "openai": earlier prompts (the newest 64)
        self.written: set[str] = set()  # "anthropic": the prefixes written at a cache_control mark

    def usage(self, request: dict) -> tuple[int, int, int]:
        """(prompt tokens, cache read tokens, cache write tokens) of this request."""
        blocks = _blocks(request)
        text = "".join(b[0] for b in blocks)
        total = _tokens(text) + 1
        if self.style == "openai":
            best = max((_common(text, old) for old in self.seen), default=0)
            self.seen = (self.seen + [text])[-64:]
            cached = _tokens(text[:best])
            cached = cached // self.block * self.block if cached >= self.minimum else 0
            return total, min(cached, total), 0
        ends = []  # (prefix text through this block, marked)
        so_far = ""
        for block_text, marked in blocks:
            so_far += block_text
            ends.append((so_far, marked))
        marks = [i for i, (_, marked) in enumerate(ends) if marked]
        if not marks:
            return total, 0, 0
        read = 0
        for prefix, _ in ends[:marks[-1] + 1]:  # a hit at any block boundary up to the last mark
            if prefix in self.written and _tokens(prefix) >= self.minimum:
                read = _tokens(prefix)
        last = ends[marks[-1]][0]
        write = 0
        for i in marks:
            prefix = ends[i][0]
            if prefix not in self.written and _tokens(prefix) >= self.minimum:
                self.written.add(prefix)
                write = _tokens(last) - read
        return total, read, max(0, write)


def _common(a: str, b: str) -> int:
    """Length of the common prefix of a and b (a binary search of slice comparisons: fast in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


class _Handler(BaseHTTPRequestHandler):
    server: "FakeOpenAI"
    # headers and body go out in two writes: with Nagle's algorithm the body waits for the client's
    # delayed ACK (about 40 ms a request on a kept-alive connection)
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def setup(self) -> None:
        if self.server.keep_alive:  # per connection: HTTP/1.1 keeps it open between requests
            self.protocol_version = "HTTP/1.1"
        super().setup()

    def _send(self, status: int, body: Any, headers: Optional[dict] = None) -> None:
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        fake = self.server
        path = self.path.rstrip("/")
        with fake.lock:
            fake.gets.append(path)
        if path == "/_fake/stats":
            self._send(200, fake.stats())
        elif path == "/openapi.json" and fake.kind == "llama-cpp-python":
            self._send(200, {"openapi": "3.1.0", "info": {"title": "🦙 llama.cpp Python API", "version": "0.3.36"}})
        elif path == "/props" and fake.kind == "llama.cpp" and fake.context:
            self._send(200, {"default_generation_settings": {"n_ctx": fake.context}, "total_slots": 1})
        elif path == "/version" and fake.kind in ("vllm", "vllm-legacy"):
            self._send(200, {"version": "0.11.2" if fake.kind == "vllm-legacy" else "0.13.0"})
        elif path == "/api/version" and fake.kind == "ollama":
            self._send(200, {"version": "0.12.3"})
        elif path == "/api/v0/models" and fake.kind == "lmstudio":
            self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "max_context_length":
                                                         fake.context} for m in fake.models]})
        elif path.endswith("/v1/models") or path == "/models":
            owner = {"vllm": "vllm", "vllm-legacy": "vllm", "sglang": "sglang", "llama-cpp-python": "me"}.get(
                fake.kind, "fake")
            extra = {"max_model_len": fake.context} if fake.context and owner not in ("fake", "me") else {}
            extra = {"permissions": []} if owner == "me" else extra
            self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": owner, **extra}
                                                        for m in fake.models]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802
        fake = self.server
        with fake.lock:
            fake.in_flight += 1
            fake.peak = max(fake.peak, fake.in_flight)
        try:
            self._post()
        finally:
            with fake.lock:
                fake.in_flight -= 1

    def _post(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        fake = self.server
        if self.path.rstrip("/") == "/api/show":
            if fake.kind == "ollama" and fake.context:
                self._send(200, {"model_info": {"llama.context_length": 131072},
                                 "parameters": f"num_ctx {fake.context}\nstop <|im_end|>"})
            else:
                self._send(404, {"error": "not found"})
            return
        with fake.lock:
            fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": request})
            rule = fake.rules[0] if fake.rules else None
            if rule is not None and rule.get("times") is not None:
                rule["times"] -= 1
                if rule["times"] <= 0:
                    fake.rules.pop(0)
        spec = {**fake.default, **(rule or {})}
        if spec.get("die"):  # a replica that crashes: no answer, the connection drops, then it is gone
            self.close_connection = True
            self.connection.close()
            threading.Thread(target=fake.die, daemon=True).start()
            return
        refused = fake.refusal(request)
        if refused is not None:
            status, message = refused
            kind = "invalid_request_error" if status == 400 else "internal_server_error"
            self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})
            return
        if spec.get("delay_s"):
            time.sleep(float(spec["delay_s"]))
        if spec.get("hang"):
            fake.hang.wait(600)
        status = int(spec.get("status", 200))
        headers = spec.get("headers") or {}
        raw = spec.get("raw_body")
        if status != 200:
            body = {"error": {"message": spec.get("error", f"fake error {status}"), "type": "fake", "code": status}}
            self._send(status, raw.encode() if isinstance(raw, str) else body, headers)
            return
        reply = spec.get("reply", DEFAULT_REPLY)
        if callable(reply):
            reply = reply(request)
        usage = spec.get("usage") or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if usage == "auto":  # about four characters a token, like a real server's count
            prompt = sum(len(str(m.get("content", ""))) for m in request.get("messages", [])) // 4 + 1
            usage = {"prompt_tokens": prompt, "completion_tokens": len(reply) // 4 + 1,
                     "total_tokens": prompt + len(reply) // 4 + 1}
        if fake.cache is not None and spec.get("cache", True):
            with fake.lock:
                prompt, read, write = fake.cache.usage(request)
            if self.path.rstrip("/").endswith("/messages"):  # Anthropic's Messages API
                self._send(200, {"id": "msg_fake", "type": "message", "role": "assistant",
                                 "model": request.get("model", "fake"), "stop_reason": "end_turn",
                                 "content": [{"type": "text", "text": reply}],
                                 "usage": {"input_tokens": prompt - read - write,
                                           "output_tokens": len(reply) // 4 + 1,
                                           "cache_read_input_tokens": read,
                                           "cache_creation_input_tokens": write}}, headers)
                with fake.lock:
                    fake.completed += 1
                return
            usage = {"prompt_tokens": prompt, "completion_tokens": len(reply) // 4 + 1,
                     "total_tokens": prompt + len(reply) // 4 + 1}
            if fake.cache.style == "openai":
                usage["prompt_tokens_details"] = {"cached_tokens": read}
            else:
                usage.update(cache_read_input_tokens=read, cache_creation_input_tokens=write)
        if request.get("stream") and not isinstance(raw, str) and not spec.get("no_stream"):
            self._stream(request, reply, usage, float(spec.get("chunk_delay_s") or 0.0))
            with fake.lock:
                fake.completed += 1
            return
        if request.get("stream") and spec.get("no_stream"):  # a server that cannot stream
            self._send(400, {"error": {"message": "stream is not supported", "type": "fake", "code": 400}})
            return
        body = {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
                "model": request.get("model", "fake"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": reply}}],
                "usage": usage}
        self._send(200, raw.encode() if isinstance(raw, str) else body, headers)
        with fake.lock:
            fake.completed += 1


    def _stream(self, request: dict, reply: str, usage: dict, chunk_delay_s: float) -> None:
        """Server-sent events as OpenAI streams them: a chunk per word of the reply, then the finish
        reason, the usage (when asked with stream_options.include_usage) and [DONE]."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if self.protocol_version != "HTTP/1.0":  # no length to tell the end by: the close tells it
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": request.get("model", "fake")}

        def event(payload: Any) -> None:
            self.wfile.write(f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n".encode())
            self.wfile.flush()

        pieces = [piece for piece in reply.split(" ")]
        for i, piece in enumerate(pieces):
            text = piece if i == len(pieces) - 1 else piece + " "
            event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text},
                                        "finish_reason": None}]})
            if chunk_delay_s:
                time.sleep(chunk_delay_s)
        event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (request.get("stream_options") or {}).get("include_usage"):
            event({**base, "choices": [], "usage": usage})
        event("[DONE]")


# How often the serving thread looks for a stop: stop() waits up to this long (socketserver's default,
# 0.5 s, cost every test that stops a server half a second on average, hundreds of times a suite).
POLL_S = 0.02


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    # the grammar fields each kind of server understands (engine.decoding sends these)
    ACCEPTS = {"llama.cpp": {"grammar", "response_format"}, "vllm": {"structured_outputs", "response_format"},
               "vllm-legacy": {"guided_grammar", "response_format"}, "sglang": {"ebnf", "response_format"},
               "ollama": {"response_format"}, "lmstudio": {"response_format"}, "plain": {"response_format"},
               "llama-cpp-python": {"grammar", "structured_outputs", "guided_grammar", "ebnf", "response_format"}}
    # llama_cpp.server's refusal of a json_schema response format (pydantic's words, as it sends them, 500)
    LLAMA_CPP_PYTHON_REFUSAL = (
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', 'ctx': {'expected': "
        "\"'text' or 'json_object'\"}}\n\n  File \"/srv/llama_cpp/server/app.py\", line 376, in "
        "create_chat_completion\n    POST /v1/chat/completions")
    GRAMMAR_FIELDS = ("grammar", "structured_outputs", "guided_grammar", "ebnf", "response_format")

    def __init__(self, delay_s: float = 0.0, reply: Any = DEFAULT_REPLY, models=("fake",),
                 usage: Any = None, kind: str = "plain", context: Optional[int] = None,
                 enforce_context: bool = False, accepts: Optional[set] = None, port: int = 0,
                 cache: Optional[str] = None, cache_min: int = 1024, cache_block: int = 128,
                 keep_alive: bool = False) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.keep_alive = keep_alive
        self.connections = 0  # TCP connections accepted
        self._open: set[Any] = set()  # the connections being served (closed when it stops)
        self.kind = kind
        self.context = context
        self.enforce_context = enforce_context
        self.accepts = set(self.ACCEPTS.get(kind, set()) if accepts is None else accepts)
        self.gets: list[str] = []
        self.dead = False
        if cache not in (None, "openai", "anthropic"):
            raise ValueError(f"cache is None, 'openai' or 'anthropic', not {cache!r}")
        self.cache = PrefixCache(cache, cache_min, cache_block) if cache else None
        self.default: dict[str, Any] = {"delay_s": delay_s, "reply": reply, "usage": usage}
        self.in_flight = 0
        self.peak = 0  # the most requests in flight at once
        self.completed = 0  # requests answered with 200
        self.rules: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.models = list(models)
        self.lock = threading.Lock()
        self.hang = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def get_request(self):
        request = super().get_request()
        with self.lock:
            self.connections += 1
            self._open.add(request[0])
        return request

    def shutdown_request(self, request) -> None:
        with self.lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def stats(self) -> dict[str, int]:
        """The counters: connections accepted, requests answered with 200, the most in flight."""
        with self.lock:
            return {"connections": self.connections, "completed": self.completed, "peak": self.peak}

    def handle_error(self, request, client_address) -> None:
        """A client that gave up (a timeout) closes the socket under a slow reply: not an error."""

    def grammar_fields(self) -> list[dict[str, Any]]:
        """Per chat request received: the grammar fields it carried, with their values."""
        with self.lock:
            bodies = [r["body"] for r in self.requests if r["path"].rstrip("/").endswith("/chat/completions")]
        return [{k: b[k] for k in self.GRAMMAR_FIELDS if k in b} for b in bodies]

    def refusal(self, request: dict) -> Optional[tuple[int, str]]:
        """(status, why) a strict server of this kind refuses the request (an unknown grammar
        field, llama-cpp-python: a json_schema response format; a prompt plus max tokens over its
        context), or None."""
        unknown = [k for k in self.GRAMMAR_FIELDS if k in request and k not in self.accepts]
        if unknown:
            return 400, f"Unrecognized request argument supplied: {unknown[0]}"
        form = request.get("response_format")
        if self.kind == "llama-cpp-python" and isinstance(form, dict) and form.get("type") not in ("text",
                                                                                                  "json_object"):
            return 500, self.LLAMA_CPP_PYTHON_REFUSAL
        if self.enforce_context and self.context:
            prompt = sum(len(str(m.get("content", ""))) for m in request.get("messages", [])) // 4 + 1
            wanted = int(request.get("max_tokens") or request.get("max_completion_tokens") or 0)
            if prompt + wanted > self.context:
                return 400, (f"This model's maximum context length is {self.context} tokens. However, you "
                             f"requested {prompt + wanted} tokens ({prompt} in the messages, {wanted} in the "
                             f"completion). Please reduce the length of the messages or completion.")
        return None

    def die(self) -> None:
        """Stop answering for good, like a replica whose process died (connections are refused)."""
        if self.dead:
            return
        self.dead = True
        self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def behave(self, times: Optional[int] = None, **spec: Any) -> "FakeOpenAI":
        """Answer the next `times` requests (all, if None) with `spec` (status, headers, reply,
        usage, delay_s, hang, raw_body, error; for a streamed request chunk_delay_s between its
        chunks, or no_stream: refuse to stream; cache=False: no cache figures) instead of the
        default. `raw_body` is sent as it is, with any status (an error body a server wrote
        itself, control characters and all)."""
        with self.lock:
            self.rules.append({**spec, "times": times})
        return self

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base(self) -> str:
        return self.base_url

    def start(self) -> "FakeOpenAI":
        self._thread = threading.Thread(target=self.serve_forever, args=(POLL_S,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.hang.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self.shutdown()
        self._thread = None
        self.server_close()
        with self.lock:  # kept-alive connections would go on being served: a stopped server is gone
            open_now, self._open = list(self._open), set()
        for sock in open_now:
            try:
                sock.shutdown(2)
            except OSError:
                pass


if __name__ == "__main__":  # a standalone server (manual checks, benchmarks): prints its base URL
    import argparse

    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible server on 127.0.0.1.")
    parser.add_argument("delay_s", nargs="?", type=float, default=0.0, help="seconds per answer")
    parser.add_argument("--keep-alive", action="store_true", help="HTTP/1.1: connections stay open")
    parser.add_argument("--reply", default=DEFAULT_REPLY)
    parser.add_argument("--usage-auto", action="store_true", help="usage counted from the prompt (4 chars a token)")
    options = parser.parse_args()
    server = FakeOpenAI(delay_s=options.delay_s, reply=options.reply, keep_alive=options.keep_alive,
                        usage="auto" if options.usage_auto else None)
    print(server.base_url, flush=True)
    server.serve_forever()
