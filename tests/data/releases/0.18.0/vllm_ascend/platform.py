# additional_config reads cut from vllm-ascend 0.18.0 vllm_ascend/platform.py
(additional_config.get("layer_sharding"))
