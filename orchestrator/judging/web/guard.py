"""Who may talk to the browser judge, and what every response carries (an ASGI middleware).

- **Token.** Every server has a per-session random token (`secrets.token_urlsafe(24)`), printed
  in the URL it gives the judge. `GET /?token=T` sets it as a cookie (HttpOnly, SameSite=Strict,
  named after the port, so two judges' servers on one host do not overwrite each other's) and
  redirects to `/`, so the token does not stay in the address bar or the history. Every other
  request must carry the cookie or an `X-Judge-Token` header with the token, else it gets
  403 and nothing else. (On loopback too: another local user, or a web page that rebinds a
  DNS name to 127.0.0.1, must not read the episodes either.)
- **Cross-site writes.** A POST (a label, a note, undo, invalid start, quit) is refused with 403
  unless it carries `X-Judge-Request: 1` (a custom header: a cross-site page cannot send it
  without a CORS preflight, which this server never approves), its `Sec-Fetch-Site`, when
  the browser sends one, is `same-origin` or `none`, and its `Origin`, when present, is this
  server's own.
- **Every response**: `Cache-Control: no-store` (videos and labels are not kept in the
  browser's or a proxy's cache), `Referrer-Policy: no-referrer`, `X-Content-Type-Options:
  nosniff`, a Content-Security-Policy that allows only the page's own script and style (by
  their hashes) and this server's media, and no framing.
"""

from __future__ import annotations

import hmac
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

SECURITY_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"pragma", b"no-cache"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
DEFAULT_CSP = b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'"
_DROPPED = {b"cache-control", b"last-modified", b"etag", b"server", b"date", b"expires"}


def cookie_name(port: int) -> str:
    return f"judge_{port}"


class Guard:
    """ASGI middleware: the token check, the cross-site check and the response headers."""

    def __init__(self, app, token: str, port: int, csp: bytes = DEFAULT_CSP):
        self.app = app
        self.token = token
        self.port = port
        self.headers = [*SECURITY_HEADERS, (b"content-security-policy", csp)]

    def _headers(self, scope) -> dict[str, str]:
        return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}

    def _authorised(self, headers: dict[str, str]) -> bool:
        given = headers.get("x-judge-token")
        if given is None and "cookie" in headers:
            cookie = SimpleCookie()
            try:
                cookie.load(headers["cookie"])
            except Exception:
                return False
            morsel = cookie.get(cookie_name(self.port))
            given = morsel.value if morsel else None
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    @staticmethod
    def cross_site(scope, headers: dict[str, str]) -> str | None:
        """Why a POST is refused as a possible cross-site request (None: it is not)."""
        if headers.get("x-judge-request") != "1":
            return "missing X-Judge-Request header"
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return f"Sec-Fetch-Site {site}"
        origin = headers.get("origin")
        if origin is not None and origin != f"{scope.get('scheme', 'http')}://{headers.get('host', '')}":
            return "foreign Origin"
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = self._headers(scope)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        offered = (query.get("token") or [None])[0]
        if scope["path"] == "/" and offered is not None:
            if hmac.compare_digest(offered.encode(), self.token.encode()):
                await self._plain(send, 303, b"", [
                    (b"location", b"/"),
                    (b"set-cookie", f"{cookie_name(self.port)}={self.token}; HttpOnly; SameSite=Strict; "
                                    "Path=/".encode())])
            else:
                await self._plain(send, 403, b"wrong token: open the URL the judge server printed\n")
            return
        if not self._authorised(headers):
            await self._plain(send, 403, b"no token: open the URL the judge server printed\n")
            return
        if scope["method"] not in ("GET", "HEAD") and (why := self.cross_site(scope, headers)):
            await self._plain(send, 403, f"refused ({why})\n".encode())
            return

        async def with_headers(message):
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _DROPPED]
                message = {**message, "headers": kept + self.headers}
            await send(message)

        await self.app(scope, receive, with_headers)

    async def _plain(self, send, status: int, body: bytes, extra: list | None = None) -> None:
        headers = [(b"content-type", b"text/plain; charset=utf-8"),
                   (b"content-length", str(len(body)).encode()), *(extra or []), *self.headers]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
