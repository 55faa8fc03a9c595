"""`orchestrator view CAMPAIGN [--trial N | --mark M] [--save FILE.rrd] [--unblinded]`: a Rerun
recording of episodes (`orchestrator/export/rerun_view.py`): cameras, joints, the commands sent,
the rig's telemetry, the success signal, the labels and the events, in the Rerun viewer or saved.

Viewing shows which policy ran, so it follows the export's unblinding rule (`plan.blinding_reasons`):
refused while the campaign is blinded (incomplete, or episodes without a definite label, or fewer
complete judges than pre-registered), unless the campaign's owner (the owner of its
`campaign.db`, who can read the key anyway) passes `--unblinded`; the refusal names the labels
that would decide every episode (`--judge NAME`). Without `--judge`, a simulated campaign's
labels are physics' (viewable once complete, whether or not a human judge has started), a real
arm's the consensus of its judges. Needs the rerun extra.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from orchestrator.core.errors import BadInput, RuntimeFailure
from orchestrator.core.extras import require_extra
from orchestrator.store.sqlite_file import DB_NAME

HELP = "a Rerun recording of episodes (cameras, joints, commands, success signal, labels, events); unblinds"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("campaign", type=Path, help="campaign directory (recordings/<campaign>)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--trial", type=int, metavar="N", help="only trial N (1-based, as the report numbers them)")
    which.add_argument("--mark", metavar="M", help="only the trials on mark M (e.g. M07)")
    parser.add_argument("--save", type=Path, metavar="FILE.rrd",
                        help="write the recording to FILE.rrd (open it with `rerun FILE.rrd`) instead of "
                             "starting the viewer")
    parser.add_argument("--judge", metavar="NAME|physics|consensus", default=None,
                        help="whose labels decide whether the campaign is still blinded (as for export)")
    parser.add_argument("--unblinded", action="store_true",
                        help="view although the campaign is still blinded (its owner only)")


def _owner_check(campaign: Path) -> None:
    db = campaign / DB_NAME
    try:
        owner = db.stat().st_uid
    except OSError as exc:
        raise BadInput(f"{db}: cannot read the campaign store: {exc.strerror}") from None
    if owner != os.geteuid():
        raise BadInput(f"--unblinded: only the campaign's owner (the owner of {db}, uid {owner}) may view "
                       "it before judging is complete")


def _check_blinding(campaign: Path, store, judge: str | None, unblinded: bool) -> None:
    from orchestrator.export.plan import blinding_reasons, blinding_way_out

    reasons = blinding_reasons(store, judge)
    if reasons and not unblinded:
        first = ("finish it first (`orchestrator run` resumes it)" if reasons[0].startswith("incomplete")
                 else "judge it first")
        raise BadInput(f"{campaign}: the campaign is still blinded ({'; '.join(reasons)}); viewing shows which "
                       f"policy ran each episode: {first}, or {blinding_way_out(store, judge)}as its "
                       "owner, pass --unblinded")
    if reasons:
        _owner_check(campaign)


def _sink(rec, save: Path | None, blueprint) -> Path | None:
    """Where the recording goes (with its layout, `blueprint`): a partial file beside FILE.rrd,
    or a spawned viewer."""
    if save is None:
        try:
            rec.spawn(default_blueprint=blueprint)
        except Exception as exc:
            raise RuntimeFailure(f"cannot start the Rerun viewer ({type(exc).__name__}: {exc}); "
                                 "pass --save FILE.rrd and open it with `rerun FILE.rrd`") from None
        return None
    if save.suffix != ".rrd":
        raise BadInput(f"--save {save}: the file must end in .rrd")
    if not save.parent.is_dir():
        raise BadInput(f"--save {save}: folder {save.parent} does not exist")
    partial = save.with_name(f".{save.name}.partial-{os.getpid()}")
    rec.save(str(partial), default_blueprint=blueprint)
    return partial


def run(args: argparse.Namespace) -> int:
    from orchestrator.core.durable import publish
    from orchestrator.judging.auto.labels import campaign_test
    from orchestrator.rigs.profile import parse_rig_text
    from orchestrator.store.sqlite import CampaignStore

    require_extra("rerun", "view")
    campaign = Path(args.campaign)
    if not (campaign / DB_NAME).is_file():
        raise BadInput(f"{campaign}: not a campaign directory (no campaign.db)")
    started = time.monotonic()
    store = CampaignStore.open_readonly(campaign)
    try:
        _check_blinding(campaign, store, args.judge, args.unblinded)
        from orchestrator.export.rerun_view import select_episodes

        views = select_episodes(store, args.trial, args.mark)
        control_fps = int(store.frozen_protocol().protocol.episode.fps)
        test = campaign_test(store)
        try:
            cameras = {name: int(spec.fps) for name, spec in parse_rig_text(store.campaign()["rig_text"]).cameras.items()}
        except Exception:
            cameras = {}
    finally:
        store.close()
    import rerun as rr
    import rerun.blueprint as rrb

    from orchestrator.export.rerun_view import layout, log_episode

    rec = rr.RecordingStream("so101_ab_view", recording_id=f"{campaign.name}-view")
    partial = _sink(rec, args.save, layout(rrb, views))
    try:
        for view in views:
            log_episode(rr, rec, campaign, view, test, control_fps, cameras)
        rec.flush()
        rec.disconnect()
        if partial is not None:
            publish(partial, args.save)
    finally:
        if partial is not None and partial.exists():
            partial.unlink()
    where = f"saved to {args.save} ({args.save.stat().st_size / 1e6:.1f} MB)" if partial else "sent to the Rerun viewer"
    print(f"{len(views)} episode(s) of {campaign} {where} in {time.monotonic() - started:.1f} s")
    return 0
