# additional_config reads cut from vllm-ascend 0.20.2rc1 vllm_ascend/patch/platform/patch_balance_schedule.py
(additional_config.get("enable_balance_scheduling", False))
