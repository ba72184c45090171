"""A tiny OpenAI-compatible chat server on 127.0.0.1 for tests: counts requests, tracks how many
are in flight at once, can answer slowly or with 429s, and plays Trust ('collaborate')."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional

DEFAULT_REPLY = "I will cooperate.\nAnswer: collaborate, Score: 2"


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, reply: Callable[[dict], str] = lambda body: DEFAULT_REPLY, delay_s: float = 0.0,
                 rate_limited: int = 0, retry_after: Optional[str] = "0", fail_status: Optional[int] = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.reply = reply
        self.delay_s = delay_s
        self.rate_limited = rate_limited  # answer the first N requests with 429
        self.retry_after = retry_after
        self.fail_status = fail_status  # answer every request with this error status (e.g. 401)
        self.requests = 0
        self.completed = 0
        self.in_flight = 0
        self.peak = 0
        self.models: list[str] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> "FakeOpenAI":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        server = self.server
        with server.lock:
            server.requests += 1
            number = server.requests
            server.in_flight += 1
            server.peak = max(server.peak, server.in_flight)
            server.models.append(str(body.get("model")))
        try:
            if server.delay_s:
                time.sleep(server.delay_s)
            if server.fail_status is not None:
                self._send(server.fail_status, {"error": {"message": "refused (fake)", "type": "invalid_request_error",
                                                          "code": "invalid_api_key"}})
                return
            if number <= server.rate_limited:
                payload = {"error": {"message": "rate limited (fake)", "type": "rate_limit_error",
                                     "code": "rate_limit_exceeded"}}
                headers = {"retry-after": server.retry_after} if server.retry_after is not None else {}
                self._send(429, payload, headers)
                return
            text = server.reply(body)
            prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4 + 1
            payload = {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
                       "model": body.get("model"),
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": prompt, "completion_tokens": len(text) // 4 + 1,
                                 "total_tokens": prompt + len(text) // 4 + 1}}
            self._send(200, payload)
            with server.lock:
                server.completed += 1
        finally:
            with server.lock:
                server.in_flight -= 1

    def _send(self, status: int, payload: dict, headers: Optional[dict] = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass
