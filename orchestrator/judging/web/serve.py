"""Run the browser judge: bind the address, print the URL (and a QR code for a tablet), serve
with uvicorn until Ctrl-C, `q` on the page, or SIGTERM.

The server listens on 127.0.0.1 unless `--host` says otherwise. Either way the URL it prints
carries the session's random token (`guard.py`), without which nothing is served; for an
address other than loopback the URL is also drawn as a QR code in the terminal (`segno`), so
a judge on a tablet on the same network scans it. Port 0 picks a free port; the printed URL
has the real one. Nothing is logged per request (an access log would print the token).
"""

from __future__ import annotations

import ipaddress
import secrets
import signal
import socket
import sys
from typing import TextIO

from orchestrator.judging.session import JudgeSession
from orchestrator.judging.source import JudgeSource
from orchestrator.judging.web.app import JudgeWeb


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def reachable_addresses(host: str) -> list[str]:
    """Addresses another machine can use for a server bound to `host` (for the printed URLs)."""
    if host not in ("0.0.0.0", "::", ""):
        return [host]
    found: list[str] = []
    try:   # the address of the interface with a route out (connect() on UDP sends nothing)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))
            found.append(probe.getsockname()[0])
    except OSError:
        pass
    try:
        found += [a for a in socket.gethostbyname_ex(socket.gethostname())[2] if a not in found]
    except OSError:
        pass
    return [a for a in found if not a.startswith("127.")] or ["127.0.0.1"]


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def url_for(host: str, port: int, token: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def print_qr(url: str, out: TextIO) -> None:
    import segno

    segno.make(url, error="m").terminal(out=out, compact=True, border=2)


def serve(source: JudgeSource, host: str = "127.0.0.1", port: int = 0, out: TextIO | None = None) -> JudgeSession:
    """Serve `source` to a browser until stopped; returns the session (for its final counts)."""
    import uvicorn

    out = out or sys.stdout
    token = secrets.token_urlsafe(24)
    sock = bind(host, port)
    port = sock.getsockname()[1]
    session = JudgeSession(source)
    server: uvicorn.Server | None = None

    def stop() -> None:
        if server is not None:
            server.should_exit = True

    web = JudgeWeb(session, token, port, on_quit=stop)
    config = uvicorn.Config(web.app, log_level="warning", access_log=False, server_header=False,
                            date_header=False, lifespan="off", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    local = is_loopback(host)
    urls = [url_for(host, port, token)] if local else [url_for(a, port, token) for a in reachable_addresses(host)]
    print(f"judge {source.judge}: {session.progress()['text']}; open in a browser:", file=out)
    for url in urls:
        print(f"  {url}", file=out)
    if not local:
        print("(anyone with this URL can judge as you: give it only to the judge; scan it on a tablet)",
              file=out)
        print_qr(urls[0], out)
    print("Ctrl-C (or q on the page) stops the server; every label is saved as it is made.", file=out,
          flush=True)
    # uvicorn handles Ctrl-C / SIGTERM (a graceful stop), then raises the signal again for the
    # handler that was there before: a no-op here, so the judge ends with its summary, exit 0
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return session
