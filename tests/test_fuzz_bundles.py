"""Judge bundles fuzzed: a damaged manifest or labels file never crashes `import-labels` or
`judge`; an import is all or nothing: a refused one leaves the campaign store unchanged, an
accepted one brings in every label the bundle holds."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cli import main
from orchestrator.core.errors import BadInput
from orchestrator.judging.bundle import BundleSource, bundle_labels, write_bundle
from orchestrator.judging.source import INVALID_START, current_labels
from orchestrator.store.sqlite import CampaignStore
from support.judge_campaign import make_campaign

FUZZ = settings(max_examples=int(os.environ.get("ORCH_FUZZ_EXAMPLES", "60")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> tuple[Path, Path]:
    """A campaign and a bundle of it in which a judge labelled every episode."""
    root = tmp_path_factory.mktemp("fuzzbundle")
    campaign = make_campaign(root)
    bundle = root / "bundle"
    write_bundle(campaign, bundle)
    source = BundleSource(bundle, "remote")
    for index, episode in enumerate(source.episodes()):
        source.add(episode.id, "success" if index % 2 else "failure")
    source.close()
    return campaign, bundle


def _mutate(text: str, data: st.DataObject) -> str:
    n = len(text)
    a = data.draw(st.integers(0, n))
    b = data.draw(st.integers(a, n))
    junk = data.draw(st.text(max_size=16))
    return data.draw(st.sampled_from([text[:a] + text[b:], text[:a] + junk + text[b:], text[:a], junk]))


def _labels_in(campaign: Path) -> int:
    with CampaignStore.open_readonly(campaign) as store:
        return len(store.judgments(include_retracted=True))


def _imported(campaign: Path) -> set[tuple[str, str, str]]:
    """(judge, episode, label) of every live label that came from a bundle."""
    with CampaignStore.open_readonly(campaign) as store:
        return {(j.judge, j.episode_id, j.label) for j in store.judgments() if j.source.startswith("bundle:")}


def _held_by(bundle: Path) -> set[tuple[str, str, str]]:
    """(judge, episode, label) of every current label in a bundle, as its reader sees them."""
    return {(judge, r.episode_id, r.label) for judge, records in bundle_labels(bundle).items()
            for r in current_labels(records).values() if r.label != INVALID_START}


def _check_import(campaign: Path, bundle: Path, capsys) -> int:
    """Run import-labels on copies and check all-or-nothing; returns the exit code."""
    before = _labels_in(campaign)
    capsys.readouterr()
    code = main(["import-labels", str(campaign), str(bundle)])
    err = capsys.readouterr().err
    assert code in (0, 2), err
    assert "internal error" not in err and "Traceback" not in err
    if code == 2:
        assert _labels_in(campaign) == before, "a refused import changed the store"
        lines = err.strip().splitlines()
        assert lines and all(re.match(r"^(orchestrator: |.+:\d+(:\d+)?: )", line) for line in lines), err
    else:
        assert _imported(campaign) == _held_by(bundle), "an accepted import left labels out"
    return code


def test_import_controls_all_and_nothing(judged, tmp_path, capsys):
    """Both branches of the fuzzed check, on inputs whose outcome is known: an intact bundle
    brings in its 8 labels; one bad label in the middle of the file refuses the whole file."""
    campaign, bundle = judged
    shutil.copytree(campaign, tmp_path / "c")
    shutil.copytree(bundle, tmp_path / "b")
    assert _check_import(tmp_path / "c", tmp_path / "b", capsys) == 0
    assert len(_imported(tmp_path / "c")) == 8
    shutil.copytree(campaign, tmp_path / "c2")
    labels = next((tmp_path / "b" / "labels").glob("*.jsonl"))
    lines = labels.read_text().splitlines()
    lines[3] = lines[3].replace('"success"', '"maybe"').replace('"failure"', '"maybe"')
    labels.write_text("\n".join(lines) + "\n")
    before = _labels_in(tmp_path / "c2")
    assert _check_import(tmp_path / "c2", tmp_path / "b", capsys) == 2
    assert _labels_in(tmp_path / "c2") == before and _imported(tmp_path / "c2") == set()


@FUZZ
@given(data=st.data(), target=st.sampled_from(["manifest.json", "labels"]))
def test_damaged_bundle_import_is_all_or_nothing(judged, tmp_path_factory, capsys, data, target):
    campaign, bundle = judged
    work = tmp_path_factory.mktemp("f")
    shutil.copytree(campaign, work / "c")
    shutil.copytree(bundle, work / "b")
    path = (work / "b" / "manifest.json") if target == "manifest.json" else \
        next((work / "b" / "labels").glob("*.jsonl"))
    path.write_text(_mutate(path.read_text(), data), encoding="utf-8")
    _check_import(work / "c", work / "b", capsys)
    if target == "manifest.json":   # the judge's reader opens it or refuses it with one line
        try:
            source = BundleSource(work / "b", "someone")
        except BadInput as exc:
            assert str(exc).strip()
        else:
            source.episodes()
            source.close()
