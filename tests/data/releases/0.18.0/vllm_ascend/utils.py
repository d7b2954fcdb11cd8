# additional_config reads cut from vllm-ascend 0.18.0 vllm_ascend/utils.py
(vllm_config.additional_config.get("multistream_overlap_shared_expert", False))
