# additional_config reads cut from vllm-ascend 0.25.1rc1 vllm_ascend/utils.py
(additional_config.get("refresh", False))
("enable_flashcomm1" in additional_config)
(additional_config["enable_flashcomm1"])
("enable_dsa_cp" in additional_config)
(additional_config["enable_dsa_cp"])
