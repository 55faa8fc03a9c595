// The browser judge's keys: the list is the server's (state.keys, from orchestrator/judging/keys.py,
// the terminal judge's list too); this file builds the buttons (for a tablet) and the `?` overlay
// from it, and runs each key's action (ACTIONS, one per action of that list). It also holds the
// boxes a key opens: the note, "go to episode N" (with the judge's own episodes: numbers in the
// judge's order and the judge's own labels, nothing else), the invalid start's reasons.
"use strict";

let keyOf = new Map();       // KeyboardEvent.key -> an entry of state.keys
let keysBuilt = false;

// one function per action of orchestrator/judging/keys.py (a test checks that none is missing)
const ACTIONS = {
  success: () => send("label", "success"),
  failure: () => send("label", "failure"),
  unsure: () => send("label", "unsure"),
  mode: (key) => send("mode", Number(key)),
  stage: () => send("stage", null),
  note: () => openNote(),
  undo: () => send("undo", null),
  goto: () => openGoto(),
  play: () => { if (clock.playing) pause(); else play(); },
  back: () => step(-1),
  forward: () => step(1),
  slower: () => changeSpeed(-1),
  faster: () => changeSpeed(1),
  end: () => toEnd(),
  camera: () => nextView(),
  audit: () => toggleAudit(),
  zoom: () => { zoom = !zoom; overlayStatus("Zoom on the mark", zoom); },
  guide: () => {
    guide = !guide;
    overlayStatus("Success-height guide" +
      (state ? ` (${state.min_height_m * 100} cm: the cube's bottom must be above the line)` : ""), guide);
  },
  invalid: () => askInvalid(),
  open: () => {
    const cam = visibleCams()[0];
    if (cam && cam.video) window.open(cam.video, "_blank", "noopener,noreferrer"); else setStatus("No video to open.");
  },
  help: () => showHelp(true),
  quit: () => quit(),
};

function send(action, value, extra = {}) {
  const episode = ep ? ep.id : null;
  queue = queue.then(async () => {
    const r = await call("/api/action", { action, value, episode, ...extra });
    metrics.answered += 1;
    if (r.status === 409) { setStatus(r.data.error, true); if (r.data.state) render(r.data.state); return; }
    if (!r.ok) { setStatus(r.data.error || `the server answered ${r.status}`, true); return; }
    render(r.data);
  }).catch((err) => { metrics.answered += 1; setStatus(`NOT SAVED (the server cannot be reached: ${err.message}); press the key again`, true); });
}

// ------------------------------------------------------------------ buttons and the `?` overlay

function button(key, text, shown) {
  const b = Object.assign(document.createElement("button"), { type: "button", textContent: `${text} ` });
  b.dataset.key = key;
  b.appendChild(Object.assign(document.createElement("kbd"), { textContent: shown }));
  return b;
}

function renderKeys(s) {
  $("modebuttons").replaceChildren(...s.failure_modes.map((m, i) => button(String(i + 1), m, String(i + 1))));
  if (keysBuilt) return;
  keysBuilt = true;
  keyOf = new Map(s.keys.flatMap((k) => k.browser.map((b) => [b, k])));
  const rows = [$("labelkeys"), $("otherkeys")];
  for (const k of s.keys) {
    const row = rows[k.group === "label" ? 0 : 1];
    if (k.action === "mode") { row.appendChild($("modebuttons")); continue; }
    const b = button(k.browser[0], k.text, k.browser[0] === " " ? "space" : k.shown);
    if (["success", "failure", "unsure"].includes(k.action)) b.classList.add("big", k.action);
    row.appendChild(b);
  }
  $("helplist").replaceChildren(...s.keys.map((k) => {
    const row = document.createElement("tr");
    row.append(Object.assign(document.createElement("th"), { textContent: k.shown }),
      Object.assign(document.createElement("td"), { textContent: k.help }));
    return row;
  }));
}

function showHelp(on) { $("help").hidden = !on; }

// ------------------------------------------------------------------ boxes: note, go to, invalid start

function openNote() {
  if (!state || !ep && !state.target) { setStatus("No episode to add a note to."); return; }
  const t = state.target;
  $("noteprompt").textContent = t ? `note for ${t.episode} (${t.label}); Enter saves, Esc cancels`
    : `note for ${ep.id} (saved with its label); Enter keeps it, Esc cancels`;
  $("note").value = t ? (t.note || "") : (state.pending_note || "");
  $("notebox").hidden = false;
  $("note").focus();
}

function openGoto() {
  if (!state) return;
  const short = { success: "s", failure: "f", unsure: "u" };
  $("gotoprompt").textContent = `go to episode (1-${state.episodes.length} of your order); Enter goes, Esc cancels`;
  $("gotolist").textContent = state.episodes.map((e) => `${e.n}:${short[e.label] || "-"}`).join("  ");
  $("goto").value = "";
  $("gotobox").hidden = false;
  $("goto").focus();
}

function closeBoxes() {
  for (const [box, input] of [["notebox", "note"], ["gotobox", "goto"]]) { $(box).hidden = true; $(input).blur(); }
}

async function quit() {
  await queue;
  const r = await call("/api/quit", {});
  pause();
  setStatus(r.ok ? `The judge server has stopped (${r.data.progress.text}); every label is saved. Close this tab.`
    : "Could not stop the server.");
}

function showInvalid(on) {
  invalidPrompt = on;
  $("invalid").hidden = !on;
}

function askInvalid() {
  if (!ep) { setStatus("No episode to mark."); return; }
  // the server refuses the reason too (JudgeSession.invalid_start); asked here without a round trip
  if (seenS > state.start_window_s || endSeen) { setStatus(state.start_only); return; }
  pause();   // choosing the reason must not play the episode past its start (as in the terminal)
  showInvalid(true);
  setStatus(state.invalid_prompt);
}

// ------------------------------------------------------------------ the keys

function press(key) {
  metrics.keys.push({ key, wall: now() });
  if (!$("help").hidden) { showHelp(false); return true; }   // any key closes the list
  if (invalidPrompt) {
    if (/^[1-9]$/.test(key)) { showInvalid(false); send("invalid", Number(key), { seen_s: seenS, end_seen: endSeen }); return true; }
    if (key === "Escape") { showInvalid(false); setStatus("Invalid start cancelled."); return true; }
  }
  const k = keyOf.get(key);
  if (!k) return false;
  ACTIONS[k.action](key);
  return true;
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const open = ["notebox", "gotobox"].find((box) => !$(box).hidden);
  if (open) {
    if (event.key === "Escape") {
      closeBoxes(); setStatus(open === "notebox" ? "Note cancelled." : "Go to: cancelled."); event.preventDefault();
    }
    return;
  }
  if (press(event.key)) event.preventDefault();
});

document.addEventListener("click", (event) => {
  if (!$("help").hidden) { showHelp(false); return; }
  const button = event.target.closest("button[data-key]");
  if (button) { press(button.dataset.key); button.blur(); }
});

document.addEventListener("DOMContentLoaded", async () => {
  $("notebox").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("note").value;
    closeBoxes();
    send("note", text);
  });
  $("gotobox").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("goto").value;
    closeBoxes();
    send("goto", text);
  });
  $("notecancel").addEventListener("click", () => { closeBoxes(); setStatus("Note cancelled."); });
  $("gotocancel").addEventListener("click", () => { closeBoxes(); setStatus("Go to: cancelled."); });
  let initial = null;
  try { initial = JSON.parse($("initial-state").textContent); } catch (err) { initial = null; }
  if (initial && initial.title) render(initial);
  else {
    const r = await call("/api/state");
    if (!r.ok) { setStatus("The judge server refused this page: open the URL it printed.", true); return; }
    render(r.data);
  }
  requestAnimationFrame(tick);
});
