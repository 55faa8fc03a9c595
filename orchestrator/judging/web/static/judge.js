// The browser judge: plays an episode's cameras at their recorded resolution on one clock,
// and sends the judge's keys to the server (app.py), which stores them as the Textual judge does.
// The keys themselves are in judge_keys.js (which follows this file in the page).
//
// Each episode opens paused on its first frame; the clock runs only when the judge plays it, so
// the invalid-start window (seenS against state.start_window_s) counts only playback the judge
// started.
//
// One clock: episode seconds = anchorT + (wall - anchorWall) x speed while playing, from 0 to the
// episode's duration. Every video plays natively at playbackRate = speed (the browser shows each
// frame at its own presentation timestamp, the recorded one) and is put back on the clock when
// it drifts by more than DRIFT_S x speed. Left/right step to the previous/next recorded frame
// time of the cameras on screen. window.judgeMetrics records key presses, episodes ready and
// the frames presented (requestVideoFrameCallback), for the tests and bench/judge_web.py.
"use strict";

const SPEEDS = [0.25, 0.5, 1, 2, 4];
const DRIFT_S = 0.12;
const SEEK_PAD_S = 0.0005;   // seek just past a frame's timestamp, so that frame is the one shown
const metrics = window.judgeMetrics = { keys: [], ready: [], frames: {}, clockAtEnd: null, ended: [], answered: 0 };

let state = null;            // the server's /api/state
let ep = null;               // the current episode (state.episode)
let view = -1;               // -1: all cameras; else the index of one camera
let audit = false, zoom = false, guide = false, invalidPrompt = false;
// what of the episode on screen has been shown: an invalid start is judged from the start alone
let seenS = 0, endSeen = false;
const clock = window.judgeClock = { t: 0, playing: false, speed: 1, anchorWall: 0, anchorT: 0, waiting: false };
const players = new Map();   // camera -> {video, cell, frame, canvas, cam}
const preloaded = new Map(); // video URL -> <video> loaded ahead
let queue = Promise.resolve();

const $ = (id) => document.getElementById(id);

function setStatus(text, error) {
  $("status").textContent = text || "";
  $("status").classList.toggle("error", !!error || /^NOT SAVED/.test(text || ""));
}

async function call(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json", "X-Judge-Request": "1" },
    body: JSON.stringify(body), credentials: "same-origin" };
  const response = await fetch(path, init);
  const data = await response.json().catch(() => ({}));
  return { ok: response.ok, status: response.status, data };
}

// ------------------------------------------------------------------ the clock

function endS() {
  if (!ep) return 0;
  let last = 0;
  for (const cam of ep.cameras) if (cam.times.length) last = Math.max(last, cam.times[cam.times.length - 1]);
  return Math.max(ep.duration_s, last);
}

function now() { return performance.now(); }

function clockAt(wall) {
  if (!clock.playing || clock.waiting) return clock.t;
  return Math.min(clock.anchorT + (wall - clock.anchorWall) / 1000 * clock.speed, endS());
}

function visibleCams() {
  if (!ep) return [];
  return view < 0 ? ep.cameras : [ep.cameras[view % ep.cameras.length]];
}

// The frame shown at t: the last frame whose timestamp is <= t, within the server's tolerance
// (core/timeline.py frame_shown_at, and its FRAME_TIME_EPS_S, sent as ep.frame_time_eps_s).
function indexAt(times, t, eps = ep.frame_time_eps_s) {
  let lo = 0, hi = times.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (times[mid] <= t + eps) lo = mid + 1; else hi = mid; }
  return Math.max(0, lo - 1);
}

function seekAll(t) {
  for (const p of players.values()) {
    if (p.video.readyState >= 1) p.video.currentTime = Math.min(t + SEEK_PAD_S, p.video.duration || t + SEEK_PAD_S);
  }
}

function setClock(t) {
  clock.t = t; clock.anchorT = t; clock.anchorWall = now();
  seenS = Math.max(seenS, t);
}

async function play() {
  if (!ep) return;
  if (clock.t >= endS() - 1e-6) { setClock(0); seekAll(0); }
  clock.playing = true; clock.waiting = true;
  const videos = [...players.values()].map((p) => p.video).filter((v) => v.src);
  for (const v of videos) v.playbackRate = clock.speed;
  await Promise.all(videos.map((v) => v.play().catch(() => null)));
  if (!clock.playing) return;
  clock.waiting = false;
  setClock(clock.t);         // the clock starts when every video has started
}

function pause() {
  clock.t = clockAt(now()); clock.playing = false; clock.waiting = false; seenS = Math.max(seenS, clock.t);
  for (const p of players.values()) p.video.pause();
}

function tick() {
  const wall = now();
  if (clock.playing && !clock.waiting && ep) {
    const t = clockAt(wall);
    clock.t = t; seenS = Math.max(seenS, t);
    if (t >= endS() - 1e-9) {
      clock.playing = false; clock.t = endS(); seenS = clock.t;
      for (const p of players.values()) p.video.pause();
      seekAll(endS());
      metrics.clockAtEnd = clock.t;
      metrics.ended.push({ episode: ep.id, clock: clock.t, wall });
    } else if (stalled(t)) {
      setClock(t);   // a camera is waiting for data (a slow network): the clock waits with it
    } else {
      for (const p of players.values()) {
        const v = p.video;
        if (v.readyState < 1) continue;
        // a camera whose last frame came before the episode's end holds that frame (play()
        // on an ended video would start it again from 0)
        if (v.ended || t >= (v.duration || Infinity) - 0.001) continue;
        if (v.paused) v.play().catch(() => null);
        if (Math.abs(v.currentTime - t) > DRIFT_S * clock.speed) v.currentTime = t;
      }
    }
  }
  drawCursor();
  requestAnimationFrame(tick);
}

function stalled(t) {
  return [...players.values()].some(({ video: v }) => v.readyState >= 1 && v.readyState < 3 && !v.seeking
    && !v.ended && t < (v.duration || Infinity) - 0.05);
}

function step(delta) {
  pause();
  const cams = visibleCams();
  const times = [...new Set(cams.flatMap((c) => c.times))].sort((a, b) => a - b);
  if (!times.length) return;
  const shown = Math.max(...cams.filter((c) => c.times.length).map((c) => c.times[indexAt(c.times, clock.t)]));
  let target;
  if (delta > 0) { const later = times.filter((t) => t > clock.t + 1e-6); target = later.length ? later[0] : clock.t; }
  else { const earlier = times.filter((t) => t < shown - 1e-6); target = earlier.length ? earlier[earlier.length - 1] : 0; }
  setClock(target); seekAll(target);
}

function toEnd() { pause(); setClock(endS()); seekAll(endS()); }

function changeSpeed(direction) {
  let i = SPEEDS.indexOf(clock.speed);
  i = Math.min(Math.max(i + direction, 0), SPEEDS.length - 1);
  clock.t = clockAt(now());
  clock.speed = SPEEDS[i];
  setClock(clock.t);
  for (const p of players.values()) p.video.playbackRate = clock.speed;
  setStatus(`Speed x${clock.speed}`);
}

function drawCursor() {
  if (!ep) { $("cursor").textContent = ""; return; }
  const cams = visibleCams();
  const cam = cams[0];
  const frame = cam && cam.times.length ? indexAt(cam.times, clock.t) + 1 : 0;
  const name = view < 0 ? (ep.cameras.length > 1 ? "all" : ep.cameras[0].name) : cam.name;
  const mode = clock.playing ? "playing" : "paused";
  $("cursor").textContent = audit
    ? `start still | first frame | last frame   (a: back to playback)   camera: ${name}`
    : `t = ${clock.t.toFixed(2)} s / ${ep.duration_s.toFixed(2)} s   frame ${frame} / ${cam ? cam.times.length : 0}` +
      `   ${mode} x${clock.speed}   camera: ${name}`;
}

// ------------------------------------------------------------------ episodes on screen

function makeVideo(url) {
  const v = document.createElement("video");
  v.muted = true; v.playsInline = true; v.preload = "auto"; v.disablePictureInPicture = true;
  v.src = url;
  return v;
}

function preload(episode) {
  if (!episode) return;
  for (const cam of episode.cameras) {
    if (!cam.video || preloaded.has(cam.video)) continue;
    const v = makeVideo(cam.video);
    v.width = cam.width; v.height = cam.height;
    $("preload").appendChild(v);
    preloaded.set(cam.video, v);
  }
}

function watchFrames(name, video) {
  const log = metrics.frames[name] = [];
  if (!video.requestVideoFrameCallback) return;
  const onFrame = (wall, meta) => {
    log.push({ wall, media: meta.mediaTime, presented: meta.presentedFrames });
    if (log.length > 3000) log.splice(0, 1000);
    if (video.isConnected) video.requestVideoFrameCallback(onFrame);
  };
  video.requestVideoFrameCallback(onFrame);
}

function cellFor(cam, media, tag) {
  const cell = document.createElement("div");
  cell.className = "cell";
  cell.style.width = `${cam.width}px`; cell.style.height = `${cam.height}px`;
  const frame = document.createElement("div");
  frame.className = "frame";
  frame.style.width = `${cam.width}px`; frame.style.height = `${cam.height}px`;
  media.width = cam.width; media.height = cam.height;
  const canvas = document.createElement("canvas");
  canvas.width = cam.width; canvas.height = cam.height;
  frame.append(media, canvas);
  const label = document.createElement("span");
  label.className = "tag"; label.textContent = tag;
  cell.append(frame, label);
  cell.judgeParts = { cam, frame, canvas };
  decorate(cell.judgeParts);
  return cell;
}

function release(video) { video.pause(); video.removeAttribute("src"); video.load(); }

function load(episode, autoplay) {
  for (const p of players.values()) release(p.video);
  players.clear();
  $("stage").replaceChildren();
  audit = false; ep = episode; clock.playing = false; clock.waiting = false; seenS = 0; endSeen = false; setClock(0);
  if (!ep) { drawCursor(); return; }
  if (view >= ep.cameras.length) view = -1;
  const waits = [];
  for (const cam of ep.cameras) {
    if (!cam.video) {
      const cell = document.createElement("div");
      cell.className = "cell"; cell.style.width = "320px"; cell.style.height = "240px";
      cell.innerHTML = '<div class="err"></div>';
      cell.firstChild.textContent = cam.error || `camera ${cam.name}: no video`;
      $("stage").appendChild(cell);
      continue;
    }
    const video = preloaded.get(cam.video) || makeVideo(cam.video);
    preloaded.delete(cam.video);
    const cell = cellFor(cam, video, cam.name);
    players.set(cam.name, { video, cell, cam });
    $("stage").appendChild(cell);
    watchFrames(cam.name, video);
    waits.push(video.readyState >= 2 ? Promise.resolve() : new Promise((resolve) => {
      video.addEventListener("loadeddata", resolve, { once: true });
      video.addEventListener("error", resolve, { once: true });
    }));
  }
  for (const url of [...preloaded.keys()]) { release(preloaded.get(url)); preloaded.delete(url); }
  applyView();
  const id = ep.id;
  Promise.all(waits).then(() => requestAnimationFrame(() => {
    if (!ep || ep.id !== id) return;
    metrics.ready.push({ episode: id, wall: now() });
    if (autoplay) play(); else seekAll(0);   // paused on the first frame, presented anew (rVFC)
    // the next episode loads once this one is on screen (so it does not compete with it)
    call("/api/upcoming").then((r) => { if (r.ok && r.data.episode && ep && ep.id === id) preload(r.data.episode); });
  }));
}

function applyView() {
  const shown = new Set(visibleCams().map((c) => c.name));
  for (const [name, p] of players) p.cell.hidden = audit || !shown.has(name);
  drawCursor();
}

function nextView() {
  if (!ep) return;
  const n = ep.cameras.length;
  view = n <= 1 ? -1 : (view + 1 >= n ? -1 : view + 1);
  applyView();
  setStatus(`Camera: ${view < 0 ? "all" : ep.cameras[view].name}`);
}

// ------------------------------------------------------------------ start-state audit and overlays

function toggleAudit() {
  pause();
  audit = !audit;
  if (audit) endSeen = true;   // the last frame is on screen
  document.querySelectorAll(".auditrow").forEach((row) => {
    row.querySelectorAll("video").forEach(release); row.remove();
  });
  if (audit && ep) {
    for (const cam of visibleCams()) {
      if (!cam.video) continue;
      const row = document.createElement("div");
      row.className = "auditrow";
      if (cam.still) {
        const img = document.createElement("img");
        img.src = cam.still; img.alt = `${cam.name} start still`;
        row.appendChild(cellFor(cam, img, `${cam.name}: start still`));
      }
      const last = cam.times.length ? cam.times[cam.times.length - 1] : 0;
      for (const [tag, t] of [["first frame", 0], ["last frame", last]]) {
        const v = makeVideo(cam.video);
        v.addEventListener("loadedmetadata", () => { v.currentTime = t + SEEK_PAD_S; }, { once: true });
        row.appendChild(cellFor(cam, v, `${cam.name}: ${tag}`));
      }
      $("stage").appendChild(row);
    }
  }
  applyView();
  setStatus(audit ? "First frame beside last: was the cube on its mark and the arm at rest?" : "Back to playback.");
}

function decorate(p) {
  const ov = p.cam.overlay;
  const ctx = p.canvas.getContext("2d");
  ctx.clearRect(0, 0, p.canvas.width, p.canvas.height);
  p.frame.style.transform = "";
  if (!ov || !(zoom || guide)) return;
  const w = p.cam.width, h = p.cam.height, sx = w / ov.width, sy = h / ov.height;
  if (guide && ov.guide) {   // the success height, extended across the frame (as overlay.draw)
    let [[u0, v0], [u1, v1]] = ov.guide;
    let x0 = u0 * sx, y0 = v0 * sy, x1 = u1 * sx, y1 = v1 * sy;
    if (x1 !== x0) { const slope = (y1 - y0) / (x1 - x0); y0 = y0 - slope * x0; y1 = y0 + slope * (w - 1); x0 = 0; x1 = w - 1; }
    ctx.strokeStyle = "rgb(255,220,0)"; ctx.lineWidth = Math.max(1, Math.floor(h / 120));
    ctx.beginPath(); ctx.moveTo(x0, y0); ctx.lineTo(x1, y1); ctx.stroke();
  }
  if (zoom && ov.zoom) {
    const [l, t, r, b] = ov.zoom;
    // the box fills the frame, as overlay.draw resizes it (the box has the frame's aspect
    // ratio unless the image's edge clipped it)
    const kx = w / Math.max(2, (r - l) * sx), ky = h / Math.max(2, (b - t) * sy);
    p.frame.style.transform = `scale(${kx}, ${ky}) translate(${-l * sx}px, ${-t * sy}px)`;
  }
}

function redecorate() {
  document.querySelectorAll(".cell").forEach((cell) => { if (cell.judgeParts) decorate(cell.judgeParts); });
}

function overlayStatus(what, on) {
  const posed = ep ? ep.cameras.filter((c) => c.overlay).map((c) => c.name) : [];
  setStatus(posed.length ? `${what} ${on ? "on" : "off"} (cameras: ${posed.join(", ")})`
    : `${what}: no camera of this episode has a known pose (the simulated rig's front camera has one; ` +
      "real cameras and wrist cameras do not)");
  redecorate();
}

// ------------------------------------------------------------------ panels

function render(s) {
  state = s;
  document.title = s.title;
  $("title").textContent = s.title;
  $("progress").textContent = s.progress.text;
  $("success").textContent = s.success_test;
  $("modes").replaceChildren(...s.failure_modes.map((m) => Object.assign(document.createElement("li"), { textContent: m })));
  $("reasons").replaceChildren(...s.invalid_reasons.map((r, i) => {
    const b = Object.assign(document.createElement("button"), { type: "button", textContent: `${i + 1}: ${r}` });
    b.dataset.key = String(i + 1);
    return b;
  }));
  const e = s.episode;
  if (!e) {
    $("episode").textContent = `All ${s.progress.total} episodes judged.\nz undoes the last label.`;
    $("label").textContent = "";
  } else {
    let head = `Episode ${e.id}\n(${e.position} in your order)\n${e.mark.text}`;
    if (e.arm_still) head += "\n! the arm never moved in this episode: check the start (a: first|last)";
    $("episode").textContent = head;
    let label = "Label: (none yet)";
    if (s.label) {
      label = `Label: ${s.label.label}` + (s.label.label === "unsure" ? " (asked again: s, f or u)" : "");
      if (s.label.failure_mode) label += `\nfailure mode: ${s.label.failure_mode}`;
      if (s.label.stage) label += `\nstage seen: ${s.label.stage}`;
      if (s.label.note) label += `\nnote: ${s.label.note}`;
    } else {
      if (s.pending_note) label += `\nnote waiting: ${s.pending_note}`;
      if (s.pending_stage) label += `\nstage seen (saved with the label): ${s.pending_stage}`;
    }
    $("label").textContent = label;
  }
  setStatus(s.status);
  renderKeys(s);
  if (!ep || !e || ep.id !== e.id) {
    load(e, false);   // paused on its first frame: the clock runs only once the judge plays it
  }
}

