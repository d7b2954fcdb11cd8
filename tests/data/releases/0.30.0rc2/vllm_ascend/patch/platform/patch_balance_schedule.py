# additional_config reads cut from vllm-ascend 0.30.0rc2 vllm_ascend/patch/platform/patch_balance_schedule.py
(additional_config.get("scheduler_config"))
("enable_balance_scheduling" in additional_config)
(additional_config["enable_balance_scheduling"])
