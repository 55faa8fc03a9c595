"""The browser judge's HTTP interface (Starlette): one page, its state as JSON, the media.
The label rules are the judging session's (`judging.session.JudgeSession`, which the Textual
judge drives too); this module turns requests into its calls.

    GET  /                 the page: `static/index.html` with `judge.css`, `judge.js` (the player)
                           and `judge_keys.js` (the keys) in one script, and the
                           session's state in it (one request before the videos)
    GET  /api/state        the session: task, progress, current episode, its label, a status line
    GET  /api/upcoming     the episode likely to come next (so the page loads it ahead)
    POST /api/action       {"action": label|mode|stage|note|undo|goto|invalid, "episode": id, "value": ...}
    POST /api/quit         stop the server (every label is already saved)
    GET  /media/{token}    a video (HTTP range requests, for seeking) or a start still

What the JSON holds is the blinded view only: opaque episode ids (random, `ep_` + 16 hex), the
mark, the duration, the cameras with their picture size and frame timestamps (seconds from
the episode's start), media tokens, and, for cameras whose pose the rig recorded, the
success-height guide and the mark zoom in the camera's pixels (`judging.overlay`). Never a
label's store id (sequential), a time of recording or a file path.

An action names the episode the judge was looking at; if the session has moved on meanwhile
(a second tab, a double press) it is refused with 409 rather than applied to another episode
(not `undo` and `goto`, which say where they go). The state carries the keys (`judging.keys`,
the terminal judge's list: the page builds its buttons, its key dispatch and its `?` overlay from
them) and, for `goto`, the judge's own episodes as numbers in the judge's order with the judge's
own labels (`JudgeSession.listing`: nothing of another judge, the schedule or a policy).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from orchestrator.core.timeline import FRAME_TIME_EPS_S
from orchestrator.judging.keys import KEYS
from orchestrator.judging.queue import START_ONLY, START_WINDOW_S
from orchestrator.judging.session import INVALID_PROMPT, JudgeSession
from orchestrator.judging.source import INVALID_START_REASONS, BlindEpisode
from orchestrator.judging.web.guard import Guard
from orchestrator.judging.web.media import MediaStore, Prepared

STATIC = Path(__file__).with_name("static")
STATE_SLOT = "{}<!--state-->"


def page_parts() -> tuple[str, bytes]:
    """The page template with the style and script in it, and the Content-Security-Policy that
    allows exactly that style and script (by their SHA-256, CSP level 2) and nothing inline else."""
    import base64
    import hashlib

    css = (STATIC / "judge.css").read_text()
    js = "\n".join((STATIC / name).read_text() for name in ("judge.js", "judge_keys.js"))
    digest = {name: base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
              for name, text in (("css", css), ("js", js))}
    html = (STATIC / "index.html").read_text().replace("<!--style-->", f"<style>{css}</style>") \
        .replace("<!--script-->", f"<script>{js}</script>")
    csp = (f"default-src 'none'; script-src 'sha256-{digest['js']}'; style-src 'sha256-{digest['css']}'; "
           "img-src 'self' blob:; media-src 'self' blob:; connect-src 'self'; form-action 'none'; "
           "frame-ancestors 'none'; base-uri 'none'")
    return html, csp.encode()


def overlay_geometry(pose: dict, episode: BlindEpisode, min_height_m: float) -> dict | None:
    """The guide's two points and the zoom box in the pose's pixels (None: nothing to draw)."""
    from orchestrator.judging.overlay import guide_segment, posed_camera, zoom_box

    if episode.mark.x is None or episode.mark.y is None:
        return None
    try:
        camera = posed_camera(pose)
        guide = guide_segment(camera, episode.mark.x, episode.mark.y, min_height_m)
        box = zoom_box(camera, episode.mark.x, episode.mark.y, min_height_m)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    points = None if any(v != v for v in guide.ravel()) else [[round(float(u), 2), round(float(v), 2)]
                                                              for u, v in guide]
    return {"width": camera[1].width, "height": camera[1].height, "guide": points, "zoom": list(box)}


class JudgeWeb:
    """The app's state: one judge's session and its media; `app` is the ASGI application."""

    def __init__(self, session: JudgeSession, token: str, port: int,
                 on_quit: Callable[[], None] | None = None):
        self.session = session
        self.media = MediaStore()
        self.on_quit = on_quit
        self.html, csp = page_parts()
        routes = [Route("/", self.page),
                  Route("/api/state", self.state), Route("/api/upcoming", self.upcoming),
                  Route("/api/action", self.action, methods=["POST"]),
                  Route("/api/quit", self.quit, methods=["POST"]),
                  Route("/media/{token}", self.media_file),
                  Route("/favicon.ico", lambda request: Response(status_code=204))]
        self.app = Guard(Starlette(routes=routes), token, port, csp)
        for episode in (session.current, session.upcoming()):   # ready before the page asks
            if episode is not None:
                self.media.prepare_async(episode)

    # ---------------------------------------------------------------- JSON

    def title(self) -> str:
        info = self.session.info
        return f"Blind judging - judge {self.session.source.judge} - {info.kind} {info.ref}"

    def episode_json(self, episode: BlindEpisode, prepared: Prepared) -> dict:
        info = self.session.info
        cameras = []
        for camera in episode.cameras:
            video = prepared.videos.get(camera)
            pose = episode.camera_poses.get(camera)
            cameras.append({
                "name": camera,
                "video": None if video is None else f"/media/{self.media.token(episode.id, camera, 'video')}",
                "width": video.width if video else 0, "height": video.height if video else 0,
                "times": [round(t, 6) for t in video.times] if video else [],
                "still": (f"/media/{self.media.token(episode.id, camera, 'still')}"
                          if camera in prepared.stills else None),
                "overlay": overlay_geometry(pose, episode, info.min_height_m) if pose else None,
                "error": prepared.errors.get(camera)})
        mark = episode.mark
        return {"id": episode.id, "position": self.session.position(episode),
                "mark": {"id": mark.id, "x": mark.x, "y": mark.y, "text": mark.describe()},
                "duration_s": episode.duration_s, "frames": episode.frames, "arm_still": episode.arm_still,
                "cameras": cameras, "error": prepared.errors.get("*"),
                # the frame shown at t is core/timeline.py's rule; the page applies it with this tolerance
                "frame_time_eps_s": FRAME_TIME_EPS_S}

    def label_json(self, episode_id: str | None) -> dict | None:
        record = self.session.labels.get(episode_id or "")
        if record is None:
            return None
        return {"label": record.label, "failure_mode": record.failure_mode, "note": record.note,
                "stage": record.stage}

    async def state_json(self) -> dict:
        session, info = self.session, self.session.info
        current = session.current
        episode = None
        if current is not None:
            prepared = await run_in_threadpool(self.media.get, current)
            episode = self.episode_json(current, prepared)
        upcoming = session.upcoming()
        if upcoming is not None:
            self.media.prepare_async(upcoming)
        target = session.annotation_target()
        return {
            "title": self.title(), "judge": session.source.judge, "kind": info.kind, "ref": info.ref,
            "success_test": info.success_test, "failure_modes": list(info.failure_modes),
            "min_height_m": info.min_height_m, "invalid_reasons": list(INVALID_START_REASONS),
            "start_window_s": START_WINDOW_S, "start_only": START_ONLY, "invalid_prompt": INVALID_PROMPT,
            "keys": [key.to_json() for key in KEYS],
            "episodes": [{"n": n, "label": label} for n, label in session.listing()],
            "progress": session.progress(), "status": session.status, "episode": episode,
            "label": self.label_json(session.current_id),
            "pending_note": session.pending_notes.get(session.current_id or ""),
            "pending_stage": session.pending_stages.get(session.current_id or ""),
            "target": None if target is None else {"episode": target.episode_id, "label": target.label,
                                                   "note": target.note},
        }

    # ---------------------------------------------------------------- routes

    async def page(self, request: Request) -> Response:
        """The page, with the state in it (a JSON data block, which the Content-Security-Policy
        lets through as it is never run): one round trip less before the first frame."""
        state = json.dumps(await self.state_json()).replace("<", "\\u003c")
        return HTMLResponse(self.html.replace(STATE_SLOT, state))

    async def state(self, request: Request) -> Response:
        return JSONResponse(await self.state_json())

    async def upcoming(self, request: Request) -> Response:
        episode = self.session.upcoming()
        if episode is None:
            return JSONResponse({"episode": None})
        prepared = await run_in_threadpool(self.media.get, episode)
        return JSONResponse({"episode": self.episode_json(episode, prepared)})

    async def action(self, request: Request) -> Response:
        try:
            body = await request.json()
            action, value = body["action"], body.get("value")
            episode = body.get("episode")
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": "bad request"}, 400)
        session = self.session
        if action not in ("undo", "goto") and episode != session.current_id:
            return JSONResponse({"error": "the episode on screen changed; look again and press the key again",
                                 "state": await self.state_json()}, 409)
        if action == "label" and value in ("success", "failure", "unsure"):
            session.label(value)
        elif action == "mode" and isinstance(value, int):
            session.mode(value)
        elif action == "stage":
            session.stage()
        elif action == "note" and (value is None or isinstance(value, str)):
            session.note(value[:2000] if value else None)
        elif action == "undo":
            session.undo()
        elif action == "goto" and isinstance(value, (str, int)) and not isinstance(value, bool):
            session.goto(str(value)[:40])
        elif action == "invalid" and isinstance(value, int):
            # what of the episode was on screen is required: a request without it is not "nothing seen"
            seen_s, end_seen = body.get("seen_s"), body.get("end_seen")
            if isinstance(seen_s, bool) or not isinstance(seen_s, (int, float)) or not isinstance(end_seen, bool):
                return JSONResponse({"error": "bad request"}, 400)
            session.invalid_start(value, float(seen_s), end_seen)
        else:
            return JSONResponse({"error": "bad request"}, 400)
        return JSONResponse(await self.state_json())

    async def quit(self, request: Request) -> Response:
        if self.on_quit is not None:
            self.on_quit()
        return JSONResponse({"stopped": True, "progress": self.session.progress()})

    async def media_file(self, request: Request) -> Response:
        found = self.media.lookup(request.path_params["token"])
        episode = self.session.episode(found[0]) if found else None
        if episode is None or found is None:
            return Response("not found\n", 404, media_type="text/plain")
        _, camera, kind = found
        prepared = await run_in_threadpool(self.media.get, episode)
        if kind == "still" and camera in prepared.stills:
            return Response(prepared.stills[camera], media_type="image/jpeg")
        video = prepared.videos.get(camera)
        if kind != "video" or video is None:
            return Response("not found\n", 404, media_type="text/plain")
        return ranged(request, video.data, "video/mp4")


def ranged(request: Request, data: bytes, media_type: str) -> Response:
    """`data` whole (200) or the one byte range asked for (206), as RFC 9110 section 14 says;
    an unsatisfiable range is 416."""
    size = len(data)
    header = request.headers.get("range", "")
    base = {"accept-ranges": "bytes"}
    if not header.startswith("bytes=") or "," in header:
        return Response(data, media_type=media_type, headers=base)
    first, _, last = header[len("bytes="):].strip().partition("-")
    try:
        if first == "":
            start, end = max(0, size - int(last)), size - 1
        else:
            start, end = int(first), min(int(last) if last else size - 1, size - 1)
    except ValueError:
        return Response(data, media_type=media_type, headers=base)
    if start >= size or start > end:
        return Response(b"", 416, headers={**base, "content-range": f"bytes */{size}"})
    return Response(data[start:end + 1], 206, media_type=media_type,
                    headers={**base, "content-range": f"bytes {start}-{end}/{size}"})
