# additional_config reads cut from vllm-ascend 0.20.2rc1 vllm_ascend/ascend_config.py
(additional_config.get("xlite_graph_config", {}))
(additional_config.get("ascend_compilation_config", {}))
(additional_config.get("ascend_fusion_config", {}))
(additional_config.get("finegrained_tp_config", {}))
(additional_config.get("eplb_config", {}))
(additional_config.get("weight_prefetch_config", {}))
(additional_config.get("profiling_chunk_config", {}))
(self._get_config_value(
            additional_config,
            "enable_balance_scheduling",
            "VLLM_ASCEND_BALANCE_SCHEDULING",
            ascend_envs.VLLM_ASCEND_BALANCE_SCHEDULING,
        ))
(self._get_config_value(
            additional_config,
            "enable_flashcomm1",
            "VLLM_ASCEND_ENABLE_FLASHCOMM1",
            ascend_envs.VLLM_ASCEND_ENABLE_FLASHCOMM1,
        ))
(additional_config.get("layer_sharding", None))
(additional_config.get("enable_shared_expert_dp", False))
(additional_config.get("multistream_overlap_shared_expert", False))
(additional_config.get("multistream_overlap_gate", False))
(additional_config.get("recompute_scheduler_enable", False))
(additional_config.get("enable_cpu_binding", True))
(additional_config.get("multistream_dsa_preprocess", False))
(additional_config.get("multistream_dsv4_dsa_overlap", False))
(additional_config.get("prefill_comm_compute_overlap", False))
(self._get_config_value(
            additional_config,
            "enable_context_parallel",
            "VLLM_ASCEND_ENABLE_CONTEXT_PARALLEL",
            ascend_envs.VLLM_ASCEND_ENABLE_CONTEXT_PARALLEL,
        ))
(self._get_config_value(
            additional_config,
            "enable_matmul_allreduce",
            "VLLM_ASCEND_ENABLE_MATMUL_ALLREDUCE",
            ascend_envs.VLLM_ASCEND_ENABLE_MATMUL_ALLREDUCE,
        ))
(self._get_config_value(
            additional_config,
            "enable_fused_mc2",
            "VLLM_ASCEND_ENABLE_FUSED_MC2",
            ascend_envs.VLLM_ASCEND_ENABLE_FUSED_MC2,
        ))
(self._get_config_value(
            additional_config,
            "enable_mlapo",
            "VLLM_ASCEND_ENABLE_MLAPO",
            ascend_envs.VLLM_ASCEND_ENABLE_MLAPO,
        ))
(self._get_config_value(
            additional_config,
            "enable_flashcomm2_parallel_size",
            "VLLM_ASCEND_FLASHCOMM2_PARALLEL_SIZE",
            ascend_envs.VLLM_ASCEND_FLASHCOMM2_PARALLEL_SIZE,
        ))
(self._get_config_value(
            additional_config,
            "msmonitor_use_daemon",
            "MSMONITOR_USE_DAEMON",
            ascend_envs.MSMONITOR_USE_DAEMON,
        ))
(self._get_config_value(
            additional_config,
            "enable_transpose_kv_cache_by_block",
            "VLLM_ASCEND_FUSION_OP_TRANSPOSE_KV_CACHE_BY_BLOCK",
            ascend_envs.VLLM_ASCEND_FUSION_OP_TRANSPOSE_KV_CACHE_BY_BLOCK,
        ))
(additional_config.get("SLO_limits_for_dynamic_batch", -1))
(additional_config.get("pa_shape_list", []))
(self._get_config_value(
            additional_config,
            "weight_nz_mode",
            "VLLM_ASCEND_ENABLE_NZ",
            ascend_envs.VLLM_ASCEND_ENABLE_NZ,
        ))
(additional_config.get("enable_async_exponential", False))
(additional_config.get("enable_kv_nz", False))
(additional_config.get("enable_sparse_c8", False))
(additional_config.get("enable_mc2_hierarchy_comm", False))
(additional_config.get("enable_reduce_sample", False))
(additional_config.get("mix_placement", False))
(additional_config.get("hamming_sparse", {"enabled": False, "sparse_json_location": ""}))
(additional_config.get("dump_config_path"))
(additional_config.get("dump_config"))
(vllm_config.additional_config.get("ascend_compilation_config", {}))
(additional_config.get("refresh", False))
