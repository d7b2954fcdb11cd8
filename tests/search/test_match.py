"""The public-record matcher (``search/match.py``): a CI config's own layout read as a search candidate, found among
the search's rows, ranked, and the top pick's gain over it with its interval."""

from __future__ import annotations

from pathlib import Path

from ascendflow.importer.sources import read_pd_config
from ascendflow.schema import load_spec
from ascendflow.search.match import candidate_of, find_row, gain, rank_of, row_fields
from ascendflow.search.space import Candidate, Knobs, Layout, RoleConfig
from tests.conftest import compose_config

ROOT = Path(__file__).resolve().parents[2]


def test_ci_pd_config_as_a_search_candidate_and_its_row() -> None:
    # QWEN3_235B_PD_3_5K_1_5k (v0.23.0): prefill TP8 × DP2 eager on node 0, decode TP1 × DP32 FULL_DECODE_ONLY on
    # nodes 1-2 (max_num_seqs 15, max_num_batched_tokens 4096)
    recipe = read_pd_config(str(ROOT / "tests/data/ci_pd/QWEN3_235B_PD_3_5K_1_5k@v0.23.0.yaml"), name="ci").recipe
    config = compose_config([f"{k.removeprefix('override /')}={v}" for d in recipe["defaults"] for k, v in d.items()])
    config.pop("hydra", None)
    config["pd"].update(recipe["pd"])
    cand, notes = candidate_of(load_spec(config), 16)
    assert cand == Candidate("pd", "w8a8_dynamic_ascend",
                             prefill=RoleConfig("prefill", Layout(1, 8, 1, 2, True), Knobs("NONE", 16, 16384)),
                             decode=RoleConfig("decode", Layout(2, 1, 1, 32, True), Knobs("FULL_DECODE_ONLY", 15, 256)),
                             prefill_instances=1, decode_instances=1)
    assert notes == ["decode max_num_batched_tokens 4096 not enumerated (the search gives a decode role 256); "
                     "matched without it"]
    fields = row_fields(cand)
    other = {**fields, "decode.max_num_seqs": 16}
    rows = [{**other, "label": "other", "rank": 1, "tps_per_device": 300.0, "tps_low": 240.0, "tps_high": 330.0},
            {**fields, "label": "ci", "rank": 2, "tps_per_device": 200.0, "tps_low": 160.0, "tps_high": 220.0}]
    assert find_row(rows, cand)["label"] == "ci"
    assert find_row(rows[:1], cand) is None
    assert rank_of(rows, rows[1]) == 2
    # a row the search pruned (no rank of its own) stands after every ranked row with more tokens/s per device
    assert rank_of(rows, {"tps_per_device": 250.0}) == 2
    g = gain(rows[0], rows[1])
    assert round(g["gain_percent"], 6) == 50.0
    assert (round(g["gain_low"], 6), round(g["gain_high"], 6)) == (round((240 / 220 - 1) * 100, 6), 106.25)


def test_colocated_instance_smaller_than_a_node_is_matched_filled_with_dp() -> None:
    config = compose_config(["hardware=atlas_800i_a2", "model=qwen3_32b", "parallel.tensor_parallel_size=4",
                             "graph=full_decode_only", "engine.max_num_seqs=32", "engine.max_num_batched_tokens=4096"])
    config.pop("hydra", None)
    cand, notes = candidate_of(load_spec(config), 8)
    assert (cand.layout, cand.knobs) == (Layout(1, 4, 1, 2, False), Knobs("FULL_DECODE_ONLY", 32, 4096))
    assert notes == ["TP4xDP1 on 4 of 8 devices matched as TP4xDP2 (DP filled to the node: the same goodput per "
                     "device)"]
