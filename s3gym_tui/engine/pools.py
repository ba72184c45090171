"""A sweep's HTTP connections: one bounded pool reused by every call to its servers (litellm's shared_session).

Without it each call goes through litellm's own pool (up to 500 connections a host). With it the
connections to each api base are bounded by the calls the sweep can have in flight there (its
concurrency for each model that server serves: HTTP/1.1 carries one request at a time on a
connection, and vLLM, SGLang and llama.cpp speak no HTTP/2) and closed when the sweep ends.

One aiohttp session for the whole sweep, not one per api base: litellm keeps the HTTP client it makes
on a provider's first call in an event loop (its key has no session in it), so a second session given
in the same loop would be ignored. aiohttp bounds it per host:port (the largest api base's bound) and
in all (their sum). A model spread over replicas goes through litellm's Router, which keeps a pool per
replica itself.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional


def bounds(configs: Iterable[Any], concurrency: int) -> dict[str, int]:
    """Connections per api base: `concurrency` for each distinct model served there alone (not as a replica)."""
    served: dict[str, set[str]] = {}
    for config in configs:
        base = config.api_base or (config.api_bases[0] if len(config.api_bases) == 1 else None)
        if base:
            served.setdefault(base, set()).add(config.model)
    return {base: concurrency * len(models) for base, models in served.items()}


class ConnectionPool:
    """The sweep's aiohttp session, made on first use in the running event loop, closed by `close`."""

    def __init__(self, limits: dict[str, int]) -> None:
        self.per_base = max(limits.values(), default=0)  # connections to one api base at most
        self.total = sum(limits.values())
        self._session: Any = None

    def session(self) -> Optional[Any]:
        """The pool, or None when the sweep calls no server of its own (litellm's pool is used)."""
        if not self.total:
            return None
        if self._session is None or self._session.closed:
            self._session = _session(self.per_base, self.total)
        return self._session

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _session(per_base: int, total: int) -> Any:
    """A session like litellm's own (its keep-alive and DNS cache settings, no cookies, a proxy from
    the environment only when litellm would take it) with at most `per_base` connections a host."""
    import os

    import litellm
    from aiohttp import ClientSession, DummyCookieJar, TCPConnector
    from litellm.constants import AIOHTTP_KEEPALIVE_TIMEOUT, AIOHTTP_TTL_DNS_CACHE

    connector = TCPConnector(limit=total, limit_per_host=per_base, keepalive_timeout=AIOHTTP_KEEPALIVE_TIMEOUT,
                             ttl_dns_cache=AIOHTTP_TTL_DNS_CACHE)
    trust_env = bool(litellm.aiohttp_trust_env) or os.getenv("AIOHTTP_TRUST_ENV", "").strip().lower() in (
        "1", "true", "yes", "on")
    return ClientSession(connector=connector, cookie_jar=DummyCookieJar(), trust_env=trust_env)
