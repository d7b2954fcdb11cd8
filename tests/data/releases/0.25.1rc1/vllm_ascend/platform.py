# additional_config reads cut from vllm-ascend 0.25.1rc1 vllm_ascend/platform.py
(vllm_config.additional_config["ascend_compilation_config"])
(vllm_config.additional_config["ascend_compilation_config"])
(vllm_config.additional_config["ascend_compilation_config"])
(vllm_config.additional_config["ascend_compilation_config"])
(vllm_config.additional_config["ascend_compilation_config"])
(vllm_config.additional_config["ascend_compilation_config"])
(vllm_config.additional_config.get("scheduler_config"))
