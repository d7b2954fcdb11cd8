"""``search.measure_top``'s picks (the top K and a seeded random control from below them), Spearman's rank
correlation and the verdict, and the MLflow fields a measured search records. Pure: no engine."""

from __future__ import annotations

import pytest
from scipy.stats import spearmanr

from ascendflow.schema import ConfigError
from ascendflow.search.pick import average_ranks, pick, spearman, verdict
from ascendflow.search.record import child_fields, measured_fields, parent_fields


def rows(n: int, pd_at: tuple[int, ...] = ()) -> list[dict]:
    """``n`` ranked rows, best first (rank i + 1), co-located except at the indices ``pd_at``."""
    return [{"id": 10 + i, "kind": "pd" if i in pd_at else "colocated", "label": f"c{i}", "rank": i + 1,
             "rps_per_device": 10.0 - i} for i in range(n)]


def test_top_k_in_rank_order_then_a_seeded_control_from_below_them():
    ranked = rows(8)
    picks = pick(ranked, 12, 2, 2, seed=0)
    assert [(r["label"], why) for r, why in picks][:2] == [("c0", "top"), ("c1", "top")]
    control = [r["label"] for r, why in picks if why == "random"]
    assert len(control) == 2 and not {"c0", "c1"} & set(control)
    # the same seed picks the same control; the rest of the ranking is the pool, in rank order
    assert [r["label"] for r, _ in pick(rows(8), 12, 2, 2, seed=0)] == [r["label"] for r, _ in picks]
    draws = {tuple(r["label"] for r, why in pick(rows(8), 12, 2, 2, seed=s) if why == "random") for s in range(20)}
    assert len(draws) > 1
    assert control == sorted(control, key=lambda label: int(label[1:]))


def test_the_control_defaults_to_as_many_as_the_top_or_what_is_left():
    assert [why for _, why in pick(rows(5), 5, 2, None, 0)] == ["top", "top", "random", "random"]
    assert [why for _, why in pick(rows(3), 3, 2, None, 0)] == ["top", "top", "random"]
    assert [why for _, why in pick(rows(2), 2, 2, None, 0)] == ["top", "top"]
    assert [why for _, why in pick(rows(4), 4, 1, 0, 0)] == ["top"]


def test_pd_candidates_are_not_picked():
    picks = pick(rows(4, pd_at=(0, 2)), 4, 1, 1, 0)
    assert [(r["label"], why) for r, why in picks] == [("c1", "top"), ("c3", "random")]


def test_more_than_the_ranking_holds_is_one_line():
    with pytest.raises(ConfigError) as err:
        pick(rows(4), 16, 5, None, 0)
    assert str(err.value) == ("search.measure_top=5: exceeds the 4 ranked co-located candidates that can be served "
                              "here (16 feasible); set search.measure_top=4 or less")
    with pytest.raises(ConfigError) as err:
        pick(rows(4), 4, 2, 3, 0)
    assert str(err.value) == ("search.measure_random=3: only 2 ranked co-located candidates are left below the top "
                              "2; set search.measure_random=2 or less")
    with pytest.raises(ConfigError) as err:
        pick(rows(2, pd_at=(0, 1)), 2, 1, None, 0)
    assert str(err.value) == ("search.measure_top=1: exceeds the 0 ranked co-located candidates that can be served "
                              "here (2 feasible); drop search.measure_top")


@pytest.mark.parametrize("x, y", [
    ([1.0, 2.0, 3.0, 4.0], [1.5, 1.0, 4.0, 3.0]),
    ([5.2, 5.2, 2.6, 2.6, 1.0], [3.1, 2.9, 2.0, 2.2, 0.4]),  # ties: average ranks
    ([3.0, 1.0], [0.5, 0.7]),
])
def test_spearman_is_scipys(x, y):
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)


def test_spearman_undefined_and_average_ranks():
    assert spearman([1.0], [2.0]) is None and spearman([1.0, 1.0], [1.0, 2.0]) is None
    assert average_ranks([5.0, 1.0, 5.0, 3.0]) == [3.5, 1.0, 3.5, 2.0]


def measured(label: str, rank: int, predicted: float, got: float) -> dict:
    return {"id": rank, "label": label, "rank": rank, "rps_per_device": predicted, "measured_rps_per_device": got,
            "measure": "top" if rank == 1 else "random"}


def test_verdict_and_the_parents_fields():
    held = verdict([measured("a", 1, 5.2, 3.0), measured("b", 3, 2.6, 1.4)])
    assert (held["n"], held["rho"], held["predicted_best"]["label"], held["held"]) == (2, 1.0, "a", True)
    broke = verdict([measured("a", 1, 5.2, 1.0), measured("b", 3, 2.6, 1.4), measured("c", 4, 1.0, 0.0)])
    assert broke["rho"] == pytest.approx(0.5) and broke["measured_best"]["label"] == "b" and not broke["held"]
    metrics, tags = parent_fields(broke, 3)
    assert metrics == {"search_measured": 3.0, "search_measure_picks": 3.0, "search_measure_failed": 0.0,
                       "search_rank_correlation": 0.5,
                       "search_predicted_best_measured_rps": 1.0, "search_measured_best_rps": 1.4,
                       "search_best_held": 0.0}
    assert tags == {"search.predicted_best": "a", "search.measured_best": "b"}
    one = parent_fields(verdict([measured("a", 1, 5.2, 3.0)]), 2)[0]
    assert "search_rank_correlation" not in one and one["search_measured"] == 1.0


def test_a_measured_child_records_its_pick_and_measurement():
    row = {**measured("a", 1, 4.0, 3.0), "status": "ranked", "kind": "colocated", "measured_capacity_rps": 3.0,
           "measured_slo_met": True, "measured_load_points": 1}
    assert child_fields(row)[2]["search.measure"] == "top"
    assert measured_fields(row) == {"measured_capacity_rps": 3.0, "measured_rps_per_device": 3.0,
                                    "measured_slo_met": 1.0, "measured_load_points": 1.0,
                                    "measured_over_predicted": 0.75}
