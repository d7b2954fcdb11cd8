"""``run.mode=attach``'s check that the deployment is the plan's: the served ``max_model_len`` (new-user trial,
defect 1: a server started with ``--max-model-len 2048`` was measured under a plan of 1024, recorded FINISHED)."""

from __future__ import annotations

import json

import pytest

from ascendflow.runner.attach import check_max_model_len, model_cards
from ascendflow.schema.errors import ConfigError

#: ``GET /v1/models`` of ``vllm serve /models/SmolLM2-135M-Instruct --served-model-name
#: HuggingFaceTB/SmolLM2-135M-Instruct --max-model-len 2048`` as vLLM 0.32.0 writes it: ``ModelList`` of
#: ``ModelCard`` with one ``ModelPermission`` (``vllm/entrypoints/serve/engine/protocol.py``, filled by
#: ``vllm/entrypoints/openai/models/serving.py`` ``show_available_models``).
BODY = json.loads("""{"object":"list","data":[{"id":"HuggingFaceTB/SmolLM2-135M-Instruct","object":"model",
"created":1764655200,"owned_by":"vllm","root":"/models/SmolLM2-135M-Instruct","parent":null,"max_model_len":2048,
"permission":[{"id":"modelperm-8c4b1f2e9a7d4c1b","object":"model_permission","created":1764655200,
"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,
"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]}]}""")
URL = "http://127.0.0.1:8000"


def test_model_cards_reads_vllm_s_model_list():
    assert model_cards(BODY) == {"HuggingFaceTB/SmolLM2-135M-Instruct": 2048}
    card = {k: v for k, v in BODY["data"][0].items() if k != "max_model_len"}  # an OpenAI server that is not vLLM
    assert model_cards({"object": "list", "data": [card]}) == {"HuggingFaceTB/SmolLM2-135M-Instruct": None}
    with pytest.raises(KeyError):
        model_cards({"object": "list"})


def test_another_max_model_len_is_one_config_error():
    served = model_cards(BODY)["HuggingFaceTB/SmolLM2-135M-Instruct"]
    with pytest.raises(ConfigError) as caught:
        check_max_model_len(URL, 1024, served)
    assert str(caught.value) == (
        "engine.max_model_len=1024: the server at http://127.0.0.1:8000 serves max_model_len 2048; attach to the "
        "deployment this plan describes, or set engine.max_model_len=2048")
    assert check_max_model_len(URL, 2048, served) is None
    assert check_max_model_len(URL, 1024, None) is None  # not reported: nothing to compare
