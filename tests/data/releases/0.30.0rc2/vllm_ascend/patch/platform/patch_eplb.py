# additional_config reads cut from vllm-ascend 0.30.0rc2 vllm_ascend/patch/platform/patch_eplb.py
(additional_config.get("eplb_config", {}))
