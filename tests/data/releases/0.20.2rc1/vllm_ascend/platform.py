# additional_config reads cut from vllm-ascend 0.20.2rc1 vllm_ascend/platform.py
(additional_config.get("layer_sharding"))
