# additional_config reads cut from vllm-ascend 0.25.1rc1 vllm_ascend/model_loader/rfork/rfork_loader.py
(additional_config.get("eplb_config", {}))
