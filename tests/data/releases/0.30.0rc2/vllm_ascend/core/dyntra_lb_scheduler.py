# additional_config reads cut from vllm-ascend 0.30.0rc2 vllm_ascend/core/dyntra_lb_scheduler.py
(additional_config.get("scheduler_config"))
(additional_config.get("scheduler_config"))
