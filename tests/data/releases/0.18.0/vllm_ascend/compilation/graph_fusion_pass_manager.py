# additional_config reads cut from vllm-ascend 0.18.0 vllm_ascend/compilation/graph_fusion_pass_manager.py
(config.additional_config.get("ascend_compilation_config", {}))
