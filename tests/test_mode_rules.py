"""Mode rules live in :meth:`ascendflow.modes.base.Mode.check`: which modes take a PD deployment (``supports_pd``)."""

from __future__ import annotations

import pytest

from ascendflow.modes import MODES
from ascendflow.schema import ConfigError
from tests.conftest import plan_for


def test_only_plan_and_rehearse_take_a_pd_deployment() -> None:
    # run.mode=search enumerates its own PD deployments (search.pd); a PD option given with it is not refused
    assert sorted(name for name, mode in MODES.items() if mode.supports_pd) == ["plan", "rehearse", "search"]
    spec, _ = plan_for(["+recipe=qwen3_8b_pd_single_node"])
    for name in ("plan", "rehearse"):
        MODES[name]().check(spec)
    for name in ("serve", "offline", "capacity"):
        with pytest.raises(ConfigError) as err:
            MODES[name]().check(spec)
        assert str(err.value) == (f"run.mode={name!r}: pd.connector={spec.pd.connector}: a PD deployment is planned "
                                  "or rehearsed only (per-role serving is not built yet, docs/pd.md); use "
                                  "run.mode=plan or rehearse")
