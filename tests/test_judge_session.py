"""The judging session's rules, tested once and directly (`orchestrator.judging.session`): the
queue, one live label per episode, failure mode and note, undo, the invalid start judged from
the start alone, a write that fails. Both faces drive this one session: the Textual judge's keys
and the browser judge's requests are shown to arrive as the same session calls, leaving the same
rows in the store.
"""

from __future__ import annotations

import asyncio
import shutil
from itertools import count
from pathlib import Path

import pytest

from orchestrator.judging.blinding import CampaignSource
from orchestrator.judging.queue import START_ONLY, START_WINDOW_S
from orchestrator.judging.session import INVALID_PROMPT, JudgeSession
from support.judge_campaign import campaign_rows, live_judgments, make_campaign

RULES = ("label", "mode", "note", "stage", "undo", "ask_invalid_start", "invalid_start")


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return make_campaign(tmp_path_factory.mktemp("session"), marks=2)


@pytest.fixture
def campaign(template, tmp_path) -> Path:
    return Path(shutil.copytree(template, tmp_path / template.name))


@pytest.fixture
def session(campaign):
    session = JudgeSession(CampaignSource(campaign, "sam"))
    yield session
    session.source.close()


def spy(session: JudgeSession) -> list[tuple]:
    """Record every rule called on `session` (name and arguments), then run it."""
    calls: list[tuple] = []
    for name in RULES:
        def recorded(*args, _rule=getattr(session, name), _name=name):  # noqa: B008 - binds this rule now, not the last one
            calls.append((_name, *args))
            return _rule(*args)
        setattr(session, name, recorded)
    return calls


def test_unjudged_first_then_the_unsure_ones_cycling(session, campaign):
    order = [e.id for e in session.order]
    assert len(order) == 4 and session.current_id == order[0]
    session.label("unsure")
    session.label("unsure")
    assert session.current_id == order[2]
    session.label("success")
    session.label("failure")
    assert session.current_id == order[0]                       # the first unsure one, asked again
    assert session.progress() == {"decided": 2, "total": 4, "unsure": 2, "text": "2 of 4 judged (2 unsure)"}
    session.label("unsure")                                     # still unsure: the next unsure one
    assert session.current_id == order[1]
    session.label("success")
    assert session.current_id == order[0]
    session.label("failure")
    assert session.current_id is None and session.progress()["text"] == "4 of 4 judged"
    session.label("success")                                    # nothing left: refused, nothing written
    assert session.status.startswith("Nothing left to judge")
    assert len(live_judgments(campaign, "sam")) == 4


def test_mode_and_note_go_with_one_live_label(session, campaign):
    first, second = (e.id for e in session.order[:2])
    session.mode(1)                                             # no failure label yet: refused
    assert session.status.startswith("Failure mode: label the episode a failure first")
    session.mode(9)                                             # the protocol lists five
    assert session.status.startswith("No failure mode 9")
    session.note(" waits ")                                     # before any label: kept for it
    assert session.pending_notes == {first: "waits"} and live_judgments(campaign, "sam") == []
    session.label("failure")
    assert live_judgments(campaign, "sam") == [(first, "failure", None, "waits")]
    session.mode(3)                                             # `second` has no label: the one just made
    assert session.status == f"Saved: failure mode 'dropped' for {first} (the episode just labelled)"
    session.note("jaw slipped")
    assert live_judgments(campaign, "sam") == [(first, "failure", "dropped", "jaw slipped")]
    session.label("unsure")
    session.mode(2)                                             # the current episode's label is unsure
    assert session.status.startswith("Failure mode: label the episode a failure first")
    assert live_judgments(campaign, "sam") == [(first, "failure", "dropped", "jaw slipped"),
                                               (second, "unsure", None, None)]
    retracted = campaign_rows(campaign, "SELECT count(*) FROM judgments WHERE judge='sam' AND retracted_at IS NOT NULL")
    assert retracted == [(2,)]                                  # each replacement retracted the one before


def test_the_stage_seen_goes_beside_the_label_and_says_nothing_of_the_episode(session, campaign):
    """`l`: the furthest stage of the progress ladder the judge saw, stepped one press at a time,
    beside the judge's one live label (before any label: saved with it). The machine judges'
    ladders (planted: `held` on one episode, nothing on the other) never show: the first press is
    `reached` on both, and the status differs only by the episode's id."""
    from orchestrator.judging.source import LADDER_STAGES
    from orchestrator.store.records import NO_STAGE, STAGES
    from orchestrator.store.sqlite import CampaignStore

    assert LADDER_STAGES == (NO_STAGE, *STAGES)                 # the judge's words are the store's
    first, second = (e.id for e in session.order[:2])
    with CampaignStore.open_for_labels(campaign) as store:
        store.add_judgment(first, "auto", "success", source="auto", stage="held",
                           stage_times={"reached": 1.0, "grasped": 2.0, "lifted": 3.0, "held": 4.0})
        store.add_judgment(second, "auto", "failure", source="auto", stage=NO_STAGE,
                           stage_times=dict.fromkeys(STAGES))
    stages = lambda: campaign_rows(campaign, "SELECT episode_id, stage FROM judgments"  # noqa: E731
                                   " WHERE judge = 'sam' AND retracted_at IS NULL ORDER BY id")
    session.label("failure")
    assert stages() == [(first, None)]                          # not recorded unless pressed
    session.stage()                                             # `second` has no label: the one just made
    said_first = session.status
    session.stage()
    session.mode(2)                                             # a failure mode keeps it
    assert stages() == [(first, "grasped")] and session.status.startswith("Saved: failure mode")
    session.label("success")
    session.stage()
    assert said_first.replace(first, "EP") == session.status.replace(second, "EP")   # reached, for each
    for _ in range(4):                                          # then grasped, lifted, held, none
        session.stage()
    assert stages() == [(first, "grasped"), (second, NO_STAGE)]
    later = JudgeSession(CampaignSource(campaign, "sam"))     # a new session: no label made in it yet
    third = later.current_id
    later.stage()                                               # kept for the current episode's label
    assert later.pending_stages == {third: "reached"} and len(stages()) == 2
    later.label("unsure")
    assert stages()[-1] == (third, "reached")
    later.source.close()
    with CampaignStore.open_readonly(campaign) as store:
        with pytest.raises(Exception, match="stage must be one of"):
            store.add_judgment(first, "sam", "success", stage="flew")   # refused before any write


def test_undo_goes_back_and_reaches_into_the_last_session(campaign):
    session = JudgeSession(CampaignSource(campaign, "sam"))
    order = [e.id for e in session.order]
    session.label("success")
    session.label("failure")
    session.undo()
    assert session.current_id == order[1] and session.status == f"Undone: failure for {order[1]}; label it again."
    assert live_judgments(campaign, "sam") == [(order[0], "success", None, None)]
    session.source.close()
    again = JudgeSession(CampaignSource(campaign, "sam"))       # reopened: the undo reaches back
    assert again.current_id == order[1]
    again.undo()
    assert again.current_id == order[0] and live_judgments(campaign, "sam") == []
    again.undo()
    assert again.status == "Nothing to undo."
    again.source.close()
    assert campaign_rows(campaign, "SELECT count(*) FROM judgments WHERE retracted_at IS NOT NULL") == [(2,)]


def test_go_to_n_relabels_with_the_old_label_kept_and_the_chain_verifies(session, campaign, capsys):
    """`j` + N: any episode of the judge's order, labelled or not; a label there is a new row with
    its time and the old one is retracted (kept), and `orchestrator verify` still checks the chain."""
    from orchestrator.cli import main

    order = [e.id for e in session.order]
    for label in ("success", "failure", "unsure", "success"):
        session.label(label)
    assert session.current_id == order[2]                          # the unsure one, asked again
    assert session.listing() == [(1, "success"), (2, "failure"), (3, "unsure"), (4, "success")]
    session.goto("2")
    assert session.current_id == order[1] and "labelled failure; s, f or u relabels it" in session.status
    session.label("success")
    assert session.status == f"Saved: success for {order[1]} (relabelled: it was failure)"
    assert session.current_id == order[2]                          # the queue goes on
    session.goto(order[3])                                         # by its id too
    assert session.current_id == order[3]
    for bad in ("0", "5", "x", "", None):
        session.goto(bad)
        assert session.current_id == order[3] and session.status.startswith("No episode"), bad
    rows = campaign_rows(campaign, "SELECT label, created_at, retracted_at FROM judgments "
                                   f"WHERE judge = 'sam' AND episode_id = '{order[1]}' ORDER BY id")
    assert [(label, retracted is not None) for label, _, retracted in rows] == [("failure", True), ("success", False)]
    assert rows[1][1] >= rows[0][1] > 0                            # each with its own time
    capsys.readouterr()
    assert main(["verify", str(campaign)]) == 0, capsys.readouterr()


def test_a_relabel_in_a_bundle_keeps_the_old_line_and_imports_the_new_label(campaign, tmp_path, capsys):
    from orchestrator.cli import main
    from orchestrator.judging.bundle import BundleSource

    assert main(["bundle", str(campaign), "--out", str(tmp_path / "b")]) == 0
    session = JudgeSession(BundleSource(tmp_path / "b", "carol"))
    first = session.order[0].id
    session.label("success")
    session.goto("1")
    session.label("failure")
    session.stage()                                                     # the stage seen goes in the file too
    session.source.close()
    lines = (tmp_path / "b" / "labels" / "carol.jsonl").read_text()
    assert '"success"' in lines and '"failure"' in lines                 # the old line stays in the file
    assert main(["import-labels", str(campaign), str(tmp_path / "b")]) == 0
    assert live_judgments(campaign, "carol") == [(first, "failure", None, None)]
    assert campaign_rows(campaign, "SELECT stage FROM judgments WHERE judge = 'carol' AND retracted_at IS NULL") \
        == [("reached",)]


def test_progress_counts_only_the_episodes_still_to_judge():
    """A bundle keeps the `invalid_start` line of an episode the judge sent back; that episode left
    the judge's order and must not count as judged (the Textual judge showed "4 of 3")."""
    from types import SimpleNamespace

    from orchestrator.judging.queue import judging_progress
    from orchestrator.judging.source import INVALID_START, LabelRecord

    order = [SimpleNamespace(id=i) for i in ("e1", "e2", "e3")]            # e4 was sent back
    labels = {"e1": LabelRecord("1", "e1", "success"), "e2": LabelRecord("2", "e2", "unsure"),
              "e4": LabelRecord("4", "e4", INVALID_START)}
    assert judging_progress(order, labels) == (1, 3, 1)
    labels["e3"] = LabelRecord("3", "e3", "failure")
    assert judging_progress(order, labels) == (2, 3, 1)


@pytest.mark.parametrize("seen_s, end_seen, allowed", [
    (0.0, False, True), (START_WINDOW_S, False, True),          # positive controls: from the start
    (START_WINDOW_S + 0.01, False, False), (0.0, True, False)])  # played on, or the last frame shown
def test_an_invalid_start_is_judged_from_the_start_alone(session, campaign, seen_s, end_seen, allowed):
    victim = session.current_id
    assert session.ask_invalid_start(seen_s, end_seen) is allowed
    assert session.status == (INVALID_PROMPT if allowed else START_ONLY)
    session.invalid_start(2, seen_s, end_seen)
    sent_back = campaign_rows(campaign, f"SELECT reason FROM attempts WHERE episode_id='{victim}' AND status='aborted'")
    if allowed:
        assert sent_back == [("invalid start (judge sam): cube knocked before the start",)]
        assert victim not in [e.id for e in session.order] and session.current_id != victim
        assert session.progress()["text"] == "0 of 3 judged"
    else:
        assert sent_back == [] and session.status == START_ONLY
        assert session.current_id == victim and len(session.order) == 4
        assert campaign_rows(campaign, "SELECT count(*) FROM events WHERE kind='invalid_start'") == [(0,)]


def test_an_episode_this_judge_labelled_cannot_be_sent_back_even_replayed_from_its_start(session, campaign):
    """An unsure episode comes back (and `z` goes back) replayed from its start, so the face's
    clock says nothing was seen; the judge saw its outcome when labelling it. Positive control:
    an episode not yet labelled, from its start, may be sent back."""
    from orchestrator.judging.session import LABELLED_ALREADY

    unsure = session.current_id
    session.label("unsure")
    for _ in range(3):
        session.label("success")
    assert session.current_id == unsure            # the unsure one is back, from its start
    assert not session.ask_invalid_start(0.0, False) and session.status == LABELLED_ALREADY
    session.invalid_start(1, 0.0, False)
    session.undo()                                  # undone: gone from the live labels, still seen
    assert session.current_id is not None
    undone = session.current_id
    assert undone not in session.labels
    assert not session.ask_invalid_start(0.0, False) and session.status == LABELLED_ALREADY
    assert campaign_rows(campaign, "SELECT count(*) FROM events WHERE kind='invalid_start'") == [(0,)]
    fresh = JudgeSession(session.source)            # a later session knows only the live labels
    fresh.go(fresh.episode(unsure))
    assert not fresh.ask_invalid_start(0.0, False)
    control = JudgeSession(session.source)
    control.go(control.episode(undone))
    assert control.ask_invalid_start(0.0, False) and control.status == INVALID_PROMPT


def test_no_such_reason_and_no_episode(session):
    session.invalid_start(4, 0.0, False)
    assert session.status == "Invalid start cancelled (no such reason)." and len(session.order) == 4
    for _ in range(4):
        session.label("success")
    assert not session.ask_invalid_start(0.0, False) and session.status == "No episode to mark."


def test_a_write_that_fails_is_said_and_the_note_kept(session, campaign):
    first = session.current_id
    real_add = session.source.add

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    session.note("keep me")
    session.source.add = disk_full
    session.label("failure")
    assert session.status.startswith("NOT SAVED (No space left on device)")
    assert session.current_id == first and session.pending_notes == {first: "keep me"}
    session.source.add = real_add
    session.label("failure")
    assert live_judgments(campaign, "sam") == [(first, "failure", None, "keep me")]


def test_queue_invariants_under_random_actions(template, tmp_path):
    """Random label/mode/undo sequences keep the queue rules (hypothesis; each example on a fresh
    copy of the recorded campaign, through the real `CampaignSource`)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from orchestrator.judging.source import current_labels

    copies = count()
    checked = []

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.sampled_from(["s", "f", "u", "1", "2", "3", "z"]), max_size=25))
    def run(keys):
        directory = Path(shutil.copytree(template, tmp_path / f"c{next(copies)}"))
        session = JudgeSession(CampaignSource(directory, "prop"))
        episodes = [e.id for e in session.order]
        try:
            for key in keys:
                if key in "sfu":
                    session.label({"s": "success", "f": "failure", "u": "unsure"}[key])
                elif key == "z":
                    session.undo()
                else:
                    session.mode(int(key))
                labels = current_labels(session.source.history())
                assert session.labels == labels
                assert {e: r.label for e, r in labels.items()} == {
                    e: lab for e, lab, _, _ in live_judgments(directory, "prop")}
                unjudged = [e for e in episodes if e not in labels]
                unsure = [e for e, r in labels.items() if r.label == "unsure"]
                assert session.current_id in (unjudged or unsure or [None])
                assert session.progress()["text"].startswith(f"{len(labels) - len(unsure)} of 4 judged")
                checked.append(key)
        finally:
            session.source.close()

    run()
    assert len(checked) > 50                                    # the loop of asserts ran


def textual_face(directory: Path, decisions: list[tuple]) -> list[tuple]:
    """The decisions as keys in the Textual judge; returns the session calls they made."""
    from orchestrator.judging.tui.app import JudgeApp

    app = JudgeApp(CampaignSource(directory, "alice"), renderer="halfcell", autoplay=False)
    calls = spy(app.session)
    keys = {"success": "s", "failure": "f", "unsure": "u"}

    async def drive():
        async with app.run_test(size=(110, 32)) as pilot:
            await pilot.pause()
            for rule, value in decisions:
                if rule == "label":
                    await pilot.press(keys[value])
                elif rule == "mode":
                    await pilot.press(str(value))
                elif rule == "note":
                    await pilot.press("n", *value, "enter")
                elif rule == "undo":
                    await pilot.press("z")
                elif rule == "stage":
                    await pilot.press("l")
                else:
                    await pilot.press("x", str(value))
            await pilot.pause()

    asyncio.run(drive())
    app.source.close()
    return calls


def browser_face(directory: Path, decisions: list[tuple]) -> list[tuple]:
    """The same decisions as the page's requests to the browser judge (in process, through the
    token guard, on this thread as uvicorn serves it); returns the session calls they made."""
    import httpx

    from orchestrator.judging.web.app import JudgeWeb

    session = JudgeSession(CampaignSource(directory, "alice"))
    calls = spy(session)
    web = JudgeWeb(session, token="t0ken", port=8765)
    headers = {"X-Judge-Token": "t0ken", "X-Judge-Request": "1"}

    async def drive():
        transport = httpx.ASGITransport(app=web.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
            state = (await client.get("/api/state", headers=headers)).json()
            assert state["invalid_prompt"] == INVALID_PROMPT and state["start_only"] == START_ONLY
            for rule, value in decisions:
                body = {"action": "invalid" if rule == "invalid_start" else rule, "value": value,
                        "episode": state["episode"]["id"] if state["episode"] else None}
                if rule == "invalid_start":
                    body.update(seen_s=0.0, end_seen=False)
                answer = await client.post("/api/action", json=body, headers=headers)
                assert answer.status_code == 200, answer.text
                state = answer.json()

    asyncio.run(drive())
    session.source.close()
    return calls


def test_the_page_must_say_what_was_on_screen_to_send_an_episode_back(template, tmp_path):
    """A request for an invalid start without `seen_s` / `end_seen` is refused (400), not taken as
    "nothing seen"; the same request with them (the positive control) sends the trial back."""
    import httpx

    from orchestrator.judging.web.app import JudgeWeb

    directory = Path(shutil.copytree(template, tmp_path / "web"))
    session = JudgeSession(CampaignSource(directory, "alice"))
    web = JudgeWeb(session, token="t0ken", port=8765)
    headers = {"X-Judge-Token": "t0ken", "X-Judge-Request": "1"}

    async def send(**extra):
        transport = httpx.ASGITransport(app=web.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
            body = {"action": "invalid", "value": 1, "episode": session.current_id, **extra}
            return (await client.post("/api/action", json=body, headers=headers)).status_code

    try:
        assert asyncio.run(send()) == 400
        assert asyncio.run(send(seen_s=0.0)) == 400
        assert asyncio.run(send(seen_s=True, end_seen=False)) == 400
        assert campaign_rows(directory, "SELECT count(*) FROM attempts WHERE status = 'aborted'") == [(0,)]
        assert asyncio.run(send(seen_s=0.2, end_seen=False)) == 200
        assert campaign_rows(directory, "SELECT count(*) FROM attempts WHERE status = 'aborted'") == [(1,)]
    finally:
        session.source.close()


def test_both_faces_make_the_same_session_calls_and_rows(template, tmp_path):
    decisions = [("label", "unsure"), ("label", "failure"), ("mode", 2), ("note", "late grip"), ("stage", None),
                 ("stage", None), ("label", "success"), ("undo", None), ("label", "success"), ("invalid_start", 3),
                 ("stage", None), ("label", "success"), ("label", "failure"), ("mode", 1)]
    tui_dir = Path(shutil.copytree(template, tmp_path / "tui"))
    web_dir = Path(shutil.copytree(template, tmp_path / "web"))
    tui_calls = textual_face(tui_dir, decisions)
    web_calls = browser_face(web_dir, decisions)
    expected = [(rule,) if rule in ("undo", "stage") else (rule, value, 0.0, False) if rule == "invalid_start"
                else (rule, value) for rule, value in decisions]
    # the Textual judge asks the session before it shows the reasons (`x`); the page asks itself
    asked = [c for c in tui_calls if c[0] == "ask_invalid_start"]
    assert asked == [("ask_invalid_start", 0.0, False)]
    assert [c for c in tui_calls if c[0] != "ask_invalid_start"] == expected
    assert web_calls == expected

    def stored(directory: Path):
        everything = campaign_rows(directory, "SELECT label, failure_mode, note, stage, retracted_at IS NULL"
                                     " FROM judgments WHERE judge = 'alice' ORDER BY id")
        aborted = campaign_rows(directory, "SELECT reason FROM attempts WHERE status = 'aborted'")
        return everything, aborted

    assert stored(tui_dir) == stored(web_dir)
    assert len(stored(web_dir)[0]) > 4 and stored(web_dir)[1] == [("invalid start (judge alice): arm not at rest",)]
    # `l` twice after the failure and its mode: reached, then grasped, beside that label; once on
    # the unsure episode that came back: beside its label, kept when it is relabelled
    stages = [row[3] for row in stored(web_dir)[0] if row[4]]
    assert stages.count("grasped") == 1 and stages.count("reached") == 1, stored(web_dir)[0]
