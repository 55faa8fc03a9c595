"""The real-time group's scheduling sample (tests/support/lanes.py `GROUP_SAMPLE`): tests of
milliseconds that carry the `realtime` xdist group by their file's name, so that
tests/test_xdist_grouping.py can check in a nested `pytest -n 2 --dist loadgroup` that one worker
runs the group without running anything on the wall clock. Each test checks the group the
conftest gave it."""

from __future__ import annotations

import pytest

from support import lanes


@pytest.mark.parametrize("case", range(6))
def test_the_sample_carries_the_real_time_group(request, case):
    group = request.node.get_closest_marker("xdist_group")
    assert group is not None and group.args == (lanes.REALTIME_GROUP,), (case, group)
