"""Opening a campaign directory: create a new campaign, or resume the one already there.

A campaign freezes its protocol (text + SHA-256), layout and rig profile at creation and
draws its schedule once. `orchestrator run` on a directory that already holds a campaign
resumes it only if the protocol and layout are byte-for-byte the ones frozen there; another
protocol is refused (exit 2), so a resumed campaign can never mix two protocols.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.errors import BadInput
from orchestrator.design.protocol import LoadedProtocol, load_protocol
from orchestrator.design.schedule import draw_schedule
from orchestrator.rigs.profile import LoadedRig, load_rig
from orchestrator.run.recording import remove_episode_files, remove_orphans
from orchestrator.store.episode_files import damaged_files
from orchestrator.store.leases import BlockClaim
from orchestrator.store.sqlite import DB_NAME, CampaignStore


@dataclass
class OpenedCampaign:
    store: CampaignStore
    protocol: LoadedProtocol
    rig: LoadedRig
    resumed: bool
    recovered: list[tuple[int, str]]   # (slot, episode id) of attempts a dead process left running
    claim: BlockClaim | None = None    # a station's claim on its block, the store's guard (run/stations.py)


def default_campaign_dir(protocol: LoadedProtocol, root: Path = Path("recordings")) -> Path:
    return root / f"{protocol.protocol.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def open_campaign(protocol_path: str | Path, rig_path: str | Path | LoadedRig, directory: Path | None,
                  store_url: str | None = None, station: str | None = None) -> OpenedCampaign:
    """Validate inputs, then create or resume the campaign in `directory` (locked for running),
    or, with `store_url`, in that PostgreSQL database with its videos under `directory`.

    `rig_path` may be an already loaded rig (the `--twin` swap of a profile); a campaign on the
    twin is a simulated campaign (its physics labels count by default, as on the sim rig)."""
    loaded = load_protocol(protocol_path)
    rig = rig_path if isinstance(rig_path, LoadedRig) else load_rig(rig_path)
    if store_url is None:
        from orchestrator.store.postgres import server_url

        store_url = server_url()
    if store_url is not None:
        return _open_on_server(loaded, rig, directory, store_url, station)
    directory = Path(directory) if directory else default_campaign_dir(loaded)
    if (directory / DB_NAME).exists():
        store = CampaignStore.open_for_run(directory)
        return _resume(store, loaded, rig, directory)
    # a creation killed before its rename leaves `campaign.db.creating` (+ journal): not a campaign,
    # and `CampaignStore.create` (under the lock) starts it again
    leftover = (".gitkeep", "campaign.lock", f"{DB_NAME}.creating")
    if directory.exists() and any(not p.name.startswith(leftover) for p in directory.iterdir()):
        raise BadInput(f"{directory}: directory is not empty and holds no campaign; choose another --out")
    store = CampaignStore.create(directory, **_campaign_fields(loaded, rig))
    return OpenedCampaign(store, loaded, rig, resumed=False, recovered=[])


def is_simulated(rig: LoadedRig) -> bool:
    """Whether the campaign runs in simulation: on the simulated rig, or a real-arm profile run on
    the twin (`--twin`); physics then labels every episode."""
    return rig.kind in ("sim", "twin")


def _campaign_fields(loaded: LoadedProtocol, rig: LoadedRig) -> dict:
    return dict(name=loaded.protocol.name, protocol_path=str(loaded.path),
                protocol_text=loaded.text, protocol_sha256=loaded.sha256, layout_text=loaded.layout_text,
                layout_sha256=loaded.layout_sha256, rig_path=str(rig.path), rig_text=rig.text,
                simulated=is_simulated(rig), schedule=draw_schedule(loaded.protocol, loaded.layout),
                audit=loaded.protocol.judging.audit)


def _open_on_server(loaded: LoadedProtocol, rig: LoadedRig, directory: Path | None, url: str,
                    station: str | None) -> OpenedCampaign:
    from orchestrator.store.postgres import create_on_server, open_on_server

    if directory is None:
        raise BadInput("--store needs --out: the shared directory (NFS/SMB mount) where every "
                       "station writes the campaign's videos")
    directory = Path(directory)
    claim = None if station is None else BlockClaim(station, loaded.protocol.stations.lease_s)
    store = create_on_server(url, directory, station=station is not None, guard=claim,
                             **_campaign_fields(loaded, rig))
    if store is not None:
        return OpenedCampaign(store, loaded, rig, resumed=False, recovered=[], claim=claim)
    store = open_on_server(url, directory, "station" if station else "run", guard=claim)
    opened = _resume(store, loaded, rig, directory, station)
    opened.claim = claim
    return opened


def _resume(store: CampaignStore, loaded: LoadedProtocol, rig: LoadedRig, directory: Path,
            station: str | None = None) -> OpenedCampaign:
    """Check an existing campaign is the same protocol and rig kind, then recover what a dead
    process left: interrupted attempts, damaged files, orphan files."""
    try:
        frozen = store.campaign()
        if frozen["protocol_sha256"] != loaded.sha256 or frozen["layout_sha256"] != loaded.layout_sha256:
            what = "protocol" if frozen["protocol_sha256"] != loaded.sha256 else "layout"
            raise BadInput(
                f"{directory}: holds campaign {frozen['name']!r} with a different {what} "
                f"(frozen sha256 {frozen['protocol_sha256'][:12]}, given {loaded.sha256[:12]}); "
                "refusing to mix protocols: use a new --out directory")
        if bool(frozen["simulated"]) != is_simulated(rig):
            raise BadInput(f"{directory}: campaign was run on a "
                           f"{'simulated' if frozen['simulated'] else 'real'} rig; "
                           f"{rig.path}{' --twin' if rig.kind == 'twin' else ''} is a "
                           f"{'simulated' if is_simulated(rig) else 'real'} rig")
        if station is not None:
            # stations differ in their rigs and must not touch each other's running attempts
            # or files: each records its rig, and claims recover blocks (stations.py)
            return OpenedCampaign(store, loaded, rig, resumed=True, recovered=[])
        if frozen["rig_text"] != rig.text:
            store.log_event("rig_changed", f"resumed with a changed rig profile {rig.path}",
                            data={"rig_text": rig.text})
        recovered = store.recover_interrupted()
        for _, episode_id in recovered:
            remove_episode_files(directory, episode_id)
        for episode in store.episodes():
            bad = damaged_files(directory, episode["digests"])
            if bad:
                slot = store.invalidate_episode(
                    episode["id"], f"recorded files missing or damaged after a restart: {', '.join(bad)}")
                assert slot is not None   # None only for an invalid start that the server undid
                remove_episode_files(directory, episode["id"])
                recovered.append((slot, episode["id"]))
        keep = {e["id"] for e in store.episodes()}
        remove_orphans(directory, keep)
    except BaseException:
        store.close()
        raise
    return OpenedCampaign(store, loaded, rig, resumed=True, recovered=recovered)

