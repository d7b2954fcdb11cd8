# additional_config reads cut from vllm-ascend 0.25.1rc1 vllm_ascend/spec_decode/llm_base_proposer.py
(self.vllm_config.additional_config.get("draft_window_size"))
