"""What the service checks and adds on every request: the ``Host`` it is asked for, security headers.

``TrustedHosts`` (ASGI middleware, like Starlette's ``TrustedHostMiddleware`` but answering in
the service's error shape) refuses with 400 a request whose ``Host`` is not a name of this
service, before anything else sees it: ``/v1``, ``/healthz``, the page and ``/docs`` alike. A
page of another site whose name an attacker re-points at 127.0.0.1 (DNS rebinding) then reads
nothing. The names (``trusted_hosts``), any port:

- bound to a loopback address (the default, 127.0.0.1) or ``localhost``: ``localhost``,
  ``127.0.0.1``, ``::1`` and the bound address;
- bound to another address or name: that one;
- bound to every address (``0.0.0.0``, ``::``, which needs an API key): any IP address written
  as such (a rebinding page always comes by a name of the attacker's, never by an address), and
  the loopback names; a DNS name of the machine must be listed;
- plus every name of ``--allowed-host`` (``ServiceSettings.allowed_hosts``): ``api.example.org``,
  ``*.example.org`` (its subdomains), or ``*`` (any: only behind a proxy that checks the name).

``SecurityHeaders`` adds to every response ``X-Content-Type-Options: nosniff``,
``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer`` and a ``Content-Security-Policy``:
the page's (``PAGE_CSP``, the policy of its ``<meta>`` tag, with ``frame-ancestors 'none'``,
which a ``<meta>`` tag cannot set), the docs' (``DOCS_CSP``: Swagger UI from this service, its
inline start-up script) or, on everything else (JSON, event streams),
``default-src 'none'; frame-ancestors 'none'``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The page's policy (``hopqa/server/static/index.html``'s ``<meta>`` tag) and what only a header can say.
PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
#: ``/docs``: Swagger UI's script and style from this service, and the inline script that starts it.
DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")
#: Everything else: data, never a document.
API_CSP = "default-src 'none'; frame-ancestors 'none'"
#: The path of the API documentation page (``DOCS_CSP``).
DOCS_PATHS = ("/docs",)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def trusted_hosts(bind: str, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The ``Host`` names a service bound to ``bind`` answers to (module docstring); ``"ip"``
    stands for any IP address."""
    bind = bind.strip().strip("[]").lower()
    names: list[str] = []
    if bind in ("0.0.0.0", "::", ""):
        names += ["ip", *LOOPBACK_NAMES]
    elif is_loopback(bind):
        names += [*LOOPBACK_NAMES, bind]
    else:
        names.append(bind)
    for name in extra:
        name = name.strip().strip("[]").lower()
        if "*" in name[1:] or (name.startswith("*") and name != "*" and not name.startswith("*.")):
            raise ValueError(f"allowed host {name!r}: a wildcard is written *.example.org (or * for any)")
        if name:
            names.append(name)
    return tuple(dict.fromkeys(names))


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, ``[::1]`` or ``localhost``) is reachable from this machine only
    (a host name may resolve to any address: not)."""
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def host_name(header: str | None) -> str | None:
    """The name of a ``Host`` header, lower case, without port or IPv6 brackets; None if malformed."""
    if not header or any(c in header for c in "/?#@\\ \t"):
        return None
    try:
        parts = urlsplit("//" + header)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return None
    return parts.hostname or None


def host_allowed(name: str, allowed: Iterable[str]) -> bool:
    for pattern in allowed:
        if pattern == "*" or name == pattern or (pattern == "ip" and _is_address(name)):
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


class TrustedHosts:
    """ASGI middleware: a request whose ``Host`` is not in ``allowed`` is a 400 (module docstring)."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or "*" in self.allowed:
            await self.app(scope, receive, send)
            return
        header = next((value.decode("latin-1") for key, value in scope.get("headers") or () if key == b"host"), None)
        name = host_name(header)
        if name is not None and host_allowed(name, self.allowed):
            await self.app(scope, receive, send)
            return
        from hopqa.server.app import error_response

        shown = (header or "")[:100].encode("ascii", "backslashreplace").decode()
        response = error_response(scope.get("path", ""), 400,
                                  f"this service does not answer to the host {shown!r}: the operator may add it "
                                  "with hopqa serve --allowed-host NAME", code="invalid_host")
        await response(scope, receive, send)


class SecurityHeaders:
    """ASGI middleware: the security headers of every response (module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path == "/" or path.startswith("/static/"):
            policy = PAGE_CSP
        elif path in DOCS_PATHS or path.startswith("/docs/"):
            policy = DOCS_CSP
        else:
            policy = API_CSP
        added = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                 (b"referrer-policy", b"no-referrer"), (b"content-security-policy", policy.encode())]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {key.lower() for key, _ in message.get("headers", ())}
                message = {**message, "headers": [*message.get("headers", ()),
                                                  *((k, v) for k, v in added if k not in names)]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
