# additional_config reads cut from vllm-ascend 0.20.2rc1 vllm_ascend/utils.py
(vllm_config.additional_config.get("multistream_overlap_shared_expert", False))
(additional_config.get("refresh", False))
("enable_flashcomm1" in additional_config)
(additional_config["enable_flashcomm1"])
("enable_dsa_cp" in additional_config)
(additional_config["enable_dsa_cp"])
