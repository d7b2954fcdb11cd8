# additional_config reads cut from vllm-ascend 0.20.2rc1 vllm_ascend/attention/kvcomp_attn/attention_utils.py
(additional_config.get("enable_hamming_sparse", False))
