"""Pushing an export to the Hugging Face Hub with LeRobot's `push_to_hub`. The token comes from
the usual Hugging Face login or `HF_TOKEN` and is never printed, logged or written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.core.errors import OrchestratorError, RuntimeFailure
from orchestrator.export.names import LICENSE


def push_dataset(root: Path, repo_id: str, *, private: bool, card_kwargs: dict[str, Any]) -> str:
    """Upload the exported dataset with LeRobot's `push_to_hub` (the token is the Hub client's
    own: login or HF_TOKEN; it is never passed, printed, logged or written here)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    kwargs = dict(card_kwargs)
    tags = kwargs.pop("tags", None)
    license_id = kwargs.pop("license", LICENSE)
    try:
        dataset = LeRobotDataset(repo_id, root=root, video_backend="pyav")
        # private=None leaves the Hub's default (an organisation's setting) for new repos
        dataset.push_to_hub(tags=tags, license=license_id, private=True if private else None, **kwargs)
    except OrchestratorError:
        raise
    except Exception as exc:
        raise RuntimeFailure(f"push of {root} to https://huggingface.co/datasets/{repo_id} failed: "
                             f"{type(exc).__name__}: {_scrub(str(exc)).splitlines()[0] if str(exc) else ''}; "
                             "the local export is complete; run the export with --push again") from None
    return f"https://huggingface.co/datasets/{repo_id}"


def _scrub(text: str) -> str:
    """Remove the Hub token from a message, should a library ever echo it."""
    try:
        from huggingface_hub import get_token

        token = get_token()
    except Exception:
        token = None
    return text.replace(token, "***") if token else text

