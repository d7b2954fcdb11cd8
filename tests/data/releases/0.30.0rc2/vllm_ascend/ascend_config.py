# additional_config reads cut from vllm-ascend 0.30.0rc2 vllm_ascend/ascend_config.py
class AscendConfig:
    enable_cpu_binding: object
    multistream_dsv4_dsa_overlap: object
    multistream_engram_overlap: object
    enable_prefill_mc2: object
    multistream_overlap_shared_expert: object
    enable_kv_nz: object
    enable_mc2_hierarchy_comm: object
    enable_dsa_cp: object
    sfa_dcp_force_tmajor_restore: object
    enable_force_eplb: object
    enable_pcp_o_proj_weight_sharding: object
    enable_pcp_embedding_lmhead_weight_sharding: object
    draft_window_size: object
    mix_placement: object
    combine_quant_mode: object
    pa_shape_list: object
    mega_moe_max_tokens: object
    ascend_log_path: object
    mc2_comm_alg: object
    enable_fused_mc2: object
    enable_mlapo: object
    mlapo_keep_prefill_weights: object
    msmonitor_use_daemon: object
    enable_transpose_kv_cache_by_block: object
    weight_nz_mode: object
    ascend_compilation_config: object
    ascend_fusion_config: object
    ascend_warmup_config: object
    eplb_config: object
    rejection_sampler_config: object
    rl_config: object
    xlite_graph_config: object
    finegrained_tp_config: object
    dynamic_spec_config: object
    enable_shared_expert_dp: object
    enable_sparse_sfa_c8: object
    enable_sparse_li_c8: object
    c8_enable_reshape_optim: object
(additional_config.get("enable_kvpp", False))
((vllm_config.additional_config or {}).get("dynamic_spec_config"))
((vc.additional_config or {}).get("enable_flashcomm1", False))
(additional_config.get("dump_config_path"))
(additional_config.get("dump_config"))
(additional_config.get("scheduler_config"))
(additional_config.get("refresh", False))
(additional_config.get("rl_config", {}))
("rl_config" in additional_config)
(additional_config.get("sparse_kv_offload_config", {}))
def _resolve(config_key):
    "additional_config.%s is read (deprecated)"
    return additional_config[config_key]
(_resolve("enable_balance_scheduling", False))
(_resolve("recompute_scheduler_enable", False))
(_resolve("short_request_first_config", {}))
(_resolve("profiling_chunk_config", {}))
(_resolve("batch_job_sched_config", {}))
