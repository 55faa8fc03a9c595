"""Judge bundles fuzzed (issue 8 item 5): a damaged manifest or labels file never crashes
`import-labels` or `judge`; a refused import leaves the campaign store unchanged."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.judge_campaign import make_campaign
from orchestrator.judging.bundle import BundleSource, write_bundle
from orchestrator.cli import main
from orchestrator.core.errors import BadInput
from orchestrator.store.sqlite import CampaignStore

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
    before = _labels_in(work / "c")
    capsys.readouterr()
    code = main(["import-labels", str(work / "c"), str(work / "b")])
    err = capsys.readouterr().err
    assert code in (0, 2), err
    assert "internal error" not in err and "Traceback" not in err
    if code == 2:
        assert _labels_in(work / "c") == before, "a refused import changed the store"
        assert all(re.match(r"^(orchestrator: |.+:\d+(:\d+)?: )", line) for line in err.strip().splitlines())
    if target == "manifest.json":
        try:
            BundleSource(work / "b", "someone")
        except BadInput:
            pass
