"""A sweep's HTTP connections: one bounded pool per api base, reused by every call to it (litellm's shared_session).

litellm keeps a pool of its own per provider and settings; a sweep's calls go through these instead,
so that the connections to one server are bounded by the calls the sweep can have in flight there
(its concurrency for each model the server serves: HTTP/1.1 carries one request at a time on a
connection, and vLLM, SGLang and llama.cpp speak no HTTP/2) and closed when the sweep ends. A model
spread over replicas goes through litellm's Router, which keeps a pool per replica itself.
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


class ConnectionPools:
    """aiohttp sessions by api base, made on first use in the running event loop, closed by `close`."""

    def __init__(self, limits: dict[str, int]) -> None:
        self.limits = dict(limits)
        self._sessions: dict[str, Any] = {}

    def session(self, api_base: Optional[str]) -> Optional[Any]:
        """The pool of `api_base`, or None when it has no bound here (litellm's own pool is used)."""
        limit = self.limits.get(api_base or "")
        if not limit:
            return None
        session = self._sessions.get(api_base)
        if session is None or session.closed:
            session = self._sessions[api_base] = _session(limit)
        return session

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()


def _session(limit: int) -> Any:
    """A session like litellm's own (its keep-alive and DNS cache settings, no cookies, a proxy from
    the environment only when litellm would take it) with at most `limit` connections."""
    import os

    import litellm
    from aiohttp import ClientSession, DummyCookieJar, TCPConnector
    from litellm.constants import AIOHTTP_KEEPALIVE_TIMEOUT, AIOHTTP_TTL_DNS_CACHE

    connector = TCPConnector(limit=limit, limit_per_host=limit, keepalive_timeout=AIOHTTP_KEEPALIVE_TIMEOUT,
                             ttl_dns_cache=AIOHTTP_TTL_DNS_CACHE)
    trust_env = bool(litellm.aiohttp_trust_env) or os.getenv("AIOHTTP_TRUST_ENV", "").strip().lower() in (
        "1", "true", "yes", "on")
    return ClientSession(connector=connector, cookie_jar=DummyCookieJar(), trust_env=trust_env)
