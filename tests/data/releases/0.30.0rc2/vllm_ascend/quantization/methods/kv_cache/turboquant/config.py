# additional_config reads cut from vllm-ascend 0.30.0rc2 vllm_ascend/quantization/methods/kv_cache/turboquant/config.py
(additional_config.get("enable_sparse_sfa_c8", False))
(additional_config.get("xlite_graph_config", {}))
