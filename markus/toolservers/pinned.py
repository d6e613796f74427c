"""The http client of http tool servers: every connection it opens is made to an address
checked at that moment (``addresses.checked``), never to the name resolved again.

Checking a URL's name and then letting the client connect to it resolves the name twice:
a DNS answer that changes in between (DNS rebinding: public when checked, 127.0.0.1 or
169.254.169.254 when connected) would reach what the network hides. Here the client's
network backend resolves the name itself, once per connection, refuses it if any address
is inside (``addresses.Refused``, surfacing as a connect error that says why), and
connects to the checked address. The request still names the host (``Host``) and TLS
still checks the name (SNI and the certificate): only the address is pinned.

Redirects: the client follows none itself; the SDK follows one only on the endpoint's own
origin (same scheme, host and port), and its new connection, like every one, is checked
here. No proxy from the environment is used: a proxy would resolve the name unchecked.

Imported when an http server is connected (with the SDK), not with Django."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio
import anyio.to_thread
import httpcore2
import httpx2

from .addresses import Refused, checked


class RefusedConnection(httpcore2.ConnectError):
    """A connection refused by the address check (mapped by httpx2 to its ConnectError,
    the message kept)."""


class CheckedBackend(httpcore2.AsyncNetworkBackend):
    """Resolves and checks each host at connect time, then connects to the addresses it
    checked, in the resolver's order (the first that answers)."""

    def __init__(self, inner: httpcore2.AsyncNetworkBackend | None = None) -> None:
        self._inner = inner or httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                found = await anyio.to_thread.run_sync(checked, host, port, abandon_on_cancel=True)
        except Refused as exc:
            raise RefusedConnection(f"the address check refused it: {exc}") from None
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"{host} was not resolved within {timeout:g} s") from None
        except (OSError, UnicodeError) as exc:
            raise httpcore2.ConnectError(f"{host} could not be resolved: {exc}") from None
        error: Exception = httpcore2.ConnectError(f"{host} resolves to no address")
        for address in found:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                error = exc
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("a tool server is not reached through a unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def client(headers: dict[str, str], timeout: float) -> httpx2.AsyncClient:
    """An AsyncClient whose every connection goes through ``CheckedBackend``; it follows
    no redirect and uses no proxy from the environment (an explicit transport)."""
    transport = httpx2.AsyncHTTPTransport()
    pool = transport._pool  # httpx2 takes no network backend: the pool it made is given ours
    if not isinstance(pool, httpcore2.AsyncConnectionPool) or not hasattr(pool, "_network_backend"):
        raise RuntimeError("httpx2's transport changed: the tool servers' address check cannot be installed")
    pool._network_backend = CheckedBackend()
    return httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(timeout), transport=transport, follow_redirects=False
    )
