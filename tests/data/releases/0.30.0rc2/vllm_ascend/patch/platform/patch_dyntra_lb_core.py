# additional_config reads cut from vllm-ascend 0.30.0rc2 vllm_ascend/patch/platform/patch_dyntra_lb_core.py
(additional_config.get("scheduler_config"))
