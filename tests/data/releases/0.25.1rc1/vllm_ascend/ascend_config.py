# additional_config reads cut from vllm-ascend 0.25.1rc1 vllm_ascend/ascend_config.py
(additional_config.get("xlite_graph_config", {}))
(additional_config.get("ascend_compilation_config", {}))
(additional_config.get("ascend_fusion_config", {}))
(additional_config.get("finegrained_tp_config", {}))
(additional_config.get("eplb_config", {}))
(self._get_config_value(
            additional_config,
            "enable_flashcomm1",
            "VLLM_ASCEND_ENABLE_FLASHCOMM1",
            ascend_envs.VLLM_ASCEND_ENABLE_FLASHCOMM1,
        ))
(additional_config.get(
            "ascend_log_path",
            os.path.join(os.path.expanduser("~"), "ascend", "log", "vllm_ascend"),
        ))
(additional_config.get("enable_shared_expert_dp", False))
(additional_config.get("multistream_overlap_shared_expert", False))
(additional_config.get("enable_cpu_binding", True))
(additional_config.get("enable_sleep_mode_extra_cleanup", False))
(additional_config.get("multistream_dsv4_dsa_overlap", True))
(additional_config.get("enable_prefill_mc2", False))
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
(additional_config.get("pa_shape_list", []))
(self._get_config_value(
            additional_config,
            "weight_nz_mode",
            "VLLM_ASCEND_ENABLE_NZ",
            ascend_envs.VLLM_ASCEND_ENABLE_NZ,
        ))
(additional_config.get("enable_kv_nz", False))
(additional_config.get("enable_sparse_c8", False))
(additional_config.get("c8_enable_reshape_optim", False))
(additional_config.get("enable_mc2_hierarchy_comm", False))
(additional_config.get("mega_moe_max_tokens", 131072))
(additional_config.get("enable_reduce_sample", False))
(additional_config.get("mix_placement", False))
(additional_config.get("rejection_sampler_config", {}))
(additional_config.get("dump_config_path"))
(additional_config.get("dump_config"))
(additional_config.get("scheduler_config"))
(self._get_config_value(
            scheduler_config,
            additional_config,
            "enable_balance_scheduling",
            balance_env_value,
            "VLLM_ASCEND_BALANCE_SCHEDULING",
        ))
(self._get_config_value(
            scheduler_config,
            additional_config,
            "recompute_scheduler_enable",
            False,
        ))
(self._get_config_value(scheduler_config, additional_config, "short_request_first_config", {}))
(self._get_config_value(scheduler_config, additional_config, "profiling_chunk_config", {}))
(self._get_config_value(scheduler_config, additional_config, "batch_job_sched_config", {}))
(additional_config.get("refresh", False))
