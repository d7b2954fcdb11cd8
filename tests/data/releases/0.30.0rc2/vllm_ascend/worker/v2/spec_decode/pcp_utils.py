# additional_config reads cut from vllm-ascend 0.30.0rc2 vllm_ascend/worker/v2/spec_decode/pcp_utils.py
(additional_config.get("scheduler_config"))
("profiling_chunk_config" in additional_config)
(additional_config["profiling_chunk_config"])
