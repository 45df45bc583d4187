"""Test tiers: which tests are too slow to run while working, and why.

``./scripts/test-quick`` runs the quick tier, ``pytest -m "not slow"`` (under a minute on
a 2-core machine); ``./scripts/test`` and CI run every test. ``tests/conftest.py`` applies
these rules at collection, so the tiers live in one place instead of on hundreds of
tests. A test gets a marker from, in turn:

- a fixture it uses (``FIXTURES``): building the wheel, a PostgreSQL database;
- its module (``MODULES``): whole modules that drive Chromium, start ``flexmatch serve``
  or other processes, or run Ray;
- itself (``TESTS``): a slow test in an otherwise quick module, or one case of it
  (``module::test[case]``).

``browser``, ``postgres`` and ``ray`` each imply ``slow``. A test may also carry a marker
of its own (``@pytest.mark.slow``, a ``pytest.param(..., marks=...)`` case).

When to add a test here: it takes more than about half a second on a 2-core machine
(find them with ``pytest --durations=20``; the quick tier names any that took over
``QUICK_LIMIT``), or needs a service the quick tier does not start.
The quick tier must still reach every module of the package: keep at least one quick
test per module (``tests/test_tiers.py`` checks what it can).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

# marker -> what it means; registered in pyproject.toml ([tool.pytest.ini_options]) too
MARKERS = {
    "slow": "seconds or more: real servers, command runs, big ingests, wheel builds",
    "browser": "drives Chromium through Playwright",
    "postgres": "needs the PostgreSQL server scripts/postgres runs",
    "ray": "starts or joins a Ray cluster",
    "serial": "measures time or memory, or restarts a shared server: runs alone, after the rest",
}
IMPLY_SLOW = frozenset({"browser", "postgres", "ray"})
# ``./scripts/test`` runs the suite on two pytest-xdist workers, then these alone: a test
# that bounds a latency or a process's memory measures the machine as much as the code
# when another test runs beside it, and the PostgreSQL tests restart the one server
IMPLY_SERIAL = frozenset({"postgres"})

FIXTURES: dict[str, tuple[str, ...]] = {
    "wheel": ("slow",),  # pip builds the package once per run
    "postgres_url": ("postgres",),
}

MODULES: dict[str, tuple[str, ...]] = {
    # owners of a knowledge base (serve, mcp, watch, ingest, Python) and commands beside them
    "tests/test_sharing.py": ("slow",),
    "tests/test_serve_cache.py": ("slow",),  # flexmatch serve and docs remove beside it
    # Chromium through Playwright
    "tests/adapters/console/test_console.py": ("browser",),
    "tests/adapters/console/test_signin_browser.py": ("browser",),
    # a Ray cluster per test
    "tests/engine/test_fanout.py": ("ray",),
    # PostgreSQL (the tests that use ``postgres_url`` are marked by the fixture too)
    "tests/test_shared_state_postgres.py": ("postgres",),
    "tests/adapters/http/test_replicas_postgres.py": ("postgres",),
    "tests/adapters/http/test_schedule_postgres.py": ("postgres",),
    # real ``flexmatch serve`` / ``ingest`` processes, killed, restarted, raced
    "tests/adapters/cli/test_crash.py": ("slow",),
    # ingests stopped by SIGINT/SIGTERM
    "tests/adapters/cli/test_interrupts.py": ("slow", "serial"),
    "tests/adapters/cli/test_sync.py": ("slow",),  # ingest --prune and sync command runs
    # sync --watch runs, files edited: debounce timing, and stopped by Ctrl-C
    "tests/adapters/cli/test_sync_watch.py": ("slow", "serial"),
    # servers syncing sources on a schedule and on request, replicas racing for a lease
    "tests/adapters/http/test_schedule.py": ("slow",),
    "tests/adapters/cli/test_file_identity.py": ("slow",),  # ingest runs, fake LLM
    "tests/adapters/cli/test_git_source.py": ("slow",),  # ingest runs on a git repository
    "tests/adapters/cli/test_dry_run_failures.py": ("slow",),  # dry and real ingest runs
    "tests/engine/test_file_identity.py": ("slow",),  # ingests with the embedding model
    "tests/engine/test_query_log.py": ("slow",),  # ingests and searches with the model
    "tests/adapters/http/test_query_log_http.py": ("slow",),  # a real server, CLI runs
    "tests/adapters/cli/test_serve_lifecycle.py": ("slow",),
    "tests/adapters/cli/test_service_commands.py": ("slow",),
    "tests/adapters/http/test_replicas.py": ("slow",),
    "tests/adapters/http/test_metrics.py": ("slow",),
    "tests/adapters/http/test_serve_logs.py": ("slow",),
    "tests/adapters/http/test_stalls.py": ("slow", "serial"),
    "tests/adapters/http/test_state_readiness.py": ("slow",),  # servers, a store held
    "tests/adapters/http/test_upload_queue_memory.py": ("slow", "serial"),
    "tests/test_deploy.py": ("slow",),
    "tests/test_lifecycle.py": ("slow",),
    "tests/test_plugins.py": ("slow",),  # plug-ins through real CLI ingests and queries
    # property-based: hundreds of generated requests and documents
    "tests/adapters/http/test_fuzz.py": ("slow",),
    # most of their tests take over 0.5 s on a loaded 2-core machine: command runs,
    # ingests with the real model, LLM chains, stores broken and repaired on disk
    "tests/adapters/cli/test_cli.py": ("slow",),
    "tests/adapters/cli/test_golden_cli.py": ("slow",),
    "tests/adapters/cli/test_code_source.py": ("slow",),
    "tests/adapters/cli/test_structure_cli.py": ("slow",),  # ingest + queries, real command
    "tests/adapters/cli/test_rough_edges.py": ("slow",),  # command runs, a real serve
    "tests/adapters/http/test_tenant_isolation.py": ("slow",),
    "tests/adapters/test_mcp_auth.py": ("slow",),
    "tests/adapters/test_mcp_http.py": ("slow",),  # flexmatch mcp --transport http processes
    "tests/adapters/cli/test_local_llm.py": ("slow",),  # ingest runs against the fake LLM
    "tests/adapters/test_one_output.py": ("slow",),
    # each framework against a local and a served knowledge base (flexmatch serve)
    "tests/adapters/test_frameworks.py": ("slow",),
    "tests/test_access_paths.py": ("slow",),  # every path, a real server: about a minute
    "tests/test_expand_served.py": ("slow",),  # a real server, real command runs
    "tests/adapters/http/test_feedback_http.py": ("slow",),  # a real server
    "tests/engine/chains/test_batching.py": ("slow",),
    "tests/engine/stores/test_store_creation.py": ("slow",),
    "tests/engine/test_embed_batching.py": ("slow",),
    "tests/engine/test_file_modes.py": ("slow",),
    "tests/engine/test_ingest.py": ("slow",),
    "tests/engine/test_incremental.py": ("slow",),  # re-ingests, one against the fake LLM
    "tests/adapters/cli/test_incremental_cli.py": ("slow",),  # ingest runs, the real model
    "tests/engine/test_warnings.py": ("slow",),
    "tests/inputs/test_records.py": ("slow",),
    "tests/inputs/parsing/test_bombs.py": ("slow",),  # bombs of 40-100 MB, built and parsed
    "tests/inputs/test_big_csv.py": ("slow",),  # 2 million rows parsed, and ingested
    "tests/inputs/test_web_deadline.py": ("slow",),
    "tests/inputs/test_ocr.py": ("slow",),  # OCR of rendered pages, CLI runs, a worker pool
    "tests/inputs/test_source_limits.py": ("slow",),  # plug-in fetches left at a deadline
    "tests/engine/test_chunker_limits.py": ("slow",),  # a chunker left at its deadline
    "tests/inputs/test_plugin_ids_cli.py": ("slow",),  # CLI runs with a plug-in on the path
    "tests/test_reindex_hostile_prompts.py": ("slow",),  # CLI re-index runs
    "tests/test_estimate.py": ("slow",),
    "tests/test_knowledge_base.py": ("slow",),
    "tests/test_citations.py": ("slow",),  # ingests a PDF and a module, queries them
    "tests/test_reindex.py": ("slow",),
    # an embedded and a served knowledge base (uvicorn), the same data ingested into both
    "tests/test_congruence.py": ("slow",),
}

# each over 0.5 s on a loaded 2-core machine (``--durations``), in modules whose other
# tests are quick (or the quick tier's only test of a package module: the agent tool,
# MCP, the store doctor)
TESTS: dict[str, tuple[str, ...]] = dict.fromkeys(
    [
        "tests/engine/test_big_documents.py::test_a_big_documents_vectors_are_reused_from_the_server_store_past_one_page",
        "tests/adapters/test_deep_surfaces.py::test_the_cli_searches_deep_and_refuses_a_bad_depth",
        "tests/test_deep_search.py::test_the_llm_writes_the_follow_ups_and_they_are_counted",
        "tests/engine/test_big_documents.py::test_a_big_documents_texts_meet_their_vectors_off_the_event_loop",
        "tests/engine/test_matched_location.py::test_a_result_cites_the_page_of_the_sentence_that_matched",
        "tests/engine/test_chain_errors.py::test_a_plug_in_chains_key_error_is_named_through_the_cli",
        "tests/test_plugin_commands.py::test_a_plug_in_command_runs_in_the_real_cli_beside_the_built_in_ones",
        "tests/engine/chains/test_spec.py::test_the_cli_works_beside_a_broken_chain_plug_in",
        "tests/test_access.py::test_property_nothing_unreadable_is_returned_listed_counted_or_shown",
        "tests/test_access.py::test_changing_only_access_rewrites_payloads_not_vectors",
        "tests/test_access.py::test_duplicates_count_only_between_documents_of_the_same_access",
        "tests/test_access.py::test_source_default_and_path_rules",
        "tests/test_access.py::test_a_knowledge_base_without_access_answers_as_before",
        "tests/test_access.py::test_cli_query_as_docs_show_and_docs_access",
        "tests/test_access.py::test_property_http_service_key_reveals_nothing_unreadable",
        "tests/test_access.py::test_http_service_key_searches_for_two_users_apart",
        "tests/test_access.py::test_http_keys_person_unbound_and_admin",
        "tests/test_access.py::test_mcp_service_key_acts_for_two_users_apart",
        "tests/test_access.py::test_cli_keys_bound_to_a_person_or_a_service",
        "tests/test_access.py::test_the_agent_tool_searches_as_the_person_the_application_names",
        "tests/test_access.py::test_console_pages_show_only_what_the_key_reads",
        "tests/test_access.py::test_console_search_as_a_colleague",
        "tests/test_access.py::test_http_jobs_show_a_key_only_its_own_jobs",
        "tests/test_access.py::test_http_a_writer_cannot_overwrite_a_document_it_cannot_read",
        "tests/test_access.py::test_http_records_without_an_id_differing_only_in_access_are_two_documents",
        "tests/test_access.py::test_a_failed_new_version_never_changes_who_reads_it",
        "tests/test_access.py::test_a_documents_content_never_widens_its_access",
        "tests/test_access.py::test_http_only_an_admin_key_sets_access",
        "tests/test_access.py::test_http_metrics_are_off_without_an_operator_token",
        "tests/test_write_access.py::test_a_writer_replaces_no_document_it_may_not_read",
        "tests/test_write_access.py::test_hidden_is_missing_for_remove_update_and_read",
        "tests/test_write_access.py::test_the_agent_tool_writes_as_its_principal_and_has_the_document_tools",
        "tests/test_write_access.py::test_frameworks_need_a_principal_over_restricted_documents",
        "tests/inputs/test_web_errors.py::test_the_cli_says_it_plainly",
        "tests/inputs/test_walk.py::test_the_cli_counts_skips_by_reason_and_exits_0",
        "tests/inputs/test_walk.py::test_the_cli_refuses_an_unknown_parser_naming_the_known_ones",
        "tests/inputs/test_walk.py::test_a_real_docs_folder_is_read_or_skipped_with_no_failure",
        "tests/inputs/test_walk.py::test_a_walk_stores_or_skips_every_file_with_a_reason",
        "tests/inputs/test_walk.py::test_the_cli_skips_non_prose_and_over_cap_files_with_exit_0",
        "tests/inputs/parsing/test_nonprose.py::test_the_reason_comes_back_from_a_parsing_worker",
        "tests/adapters/cli/test_cli_quick.py::test_a_command_on_a_folder_without_a_config_is_refused",
        "tests/adapters/cli/test_cli_quick.py::test_every_template_listed_is_accepted",
        "tests/adapters/cli/test_terminal_text.py::test_an_error_quoting_hostile_text_shows_it_as_text",
        "tests/adapters/cli/test_terminal_text.py::test_docs_list_and_show_show_hostile_text_as_text",
        "tests/adapters/cli/test_terminal_text.py::test_keys_list_shows_a_hostile_key_name_as_text",
        "tests/adapters/http/test_hostile_inputs.py::test_put_after_an_upload_job_is_applied_after_it",
        "tests/adapters/http/test_http_api.py::test_bulk_upload_list_filters_and_pagination",
        "tests/adapters/http/test_http_api.py::test_errors_are_one_json_shape",
        "tests/adapters/http/test_http_api.py::test_upload_job_then_searchable",
        "tests/adapters/http/test_http_api.py::test_url_import_applies_web_safety_rules",
        "tests/adapters/http/test_input_edges.py::test_a_5000_character_file_name_does_not_refuse_its_batch",
        "tests/adapters/http/test_input_edges.py::test_console_links_lead_to_their_own_document",
        "tests/adapters/http/test_input_edges.py::test_ids_repeated_in_one_records_request_fail_alone",
        "tests/adapters/http/test_shared_service.py::test_a_running_job_beats_and_a_shutdown_is_recorded",
        "tests/adapters/http/test_throttle.py::test_a_key_id_guessed_from_many_addresses_still_lets_its_owner_in",
        "tests/adapters/http/test_throttle.py::test_tables_are_bounded_and_a_zero_budget_turns_throttling_off",
        "tests/adapters/http/test_upload_queue.py::test_a_tenant_over_its_byte_cap_gets_429_and_spooled_files_are_owner_only_and_removed",
        "tests/adapters/http/test_upload_queue.py::test_a_tenant_over_its_job_cap_gets_429_and_another_tenant_goes_on",
        "tests/adapters/test_agent.py::test_example_agent_loop_makes_a_tool_call_round_trip",
        "tests/adapters/test_agent.py::test_example_returns_a_direct_answer_from_the_fake_llm",
        "tests/adapters/test_agent.py::test_agent_demo_command_runs_offline_against_the_fake_llm_command",
        "tests/adapters/test_agent.py::test_run_agent_stops_at_max_steps_and_says_a_refused_key",
        "tests/adapters/test_agent.py::test_handle_tool_call_searches_and_reports_mistakes",
        "tests/adapters/test_agent.py::test_handle_tool_call_writes_unless_read_only",
        "tests/adapters/test_mcp.py::test_stdio_read_only_drops_write_tools",
        "tests/adapters/test_mcp.py::test_stdio_session_lists_tools_and_searches",
        "tests/adapters/test_mcp.py::test_streamable_http_and_tenant_scope",
        "tests/adapters/test_mcp.py::test_filters_are_the_same_vocabulary_as_everywhere",
        "tests/adapters/test_mcp.py::test_no_records_source_no_add_record",
        "tests/engine/stores/test_repair.py::test_a_delete_that_reaches_an_unreadable_point_deletes_the_rest",
        "tests/engine/stores/test_repair.py::test_doctor_finds_a_point_only_the_segments_hold",
        "tests/engine/stores/test_repair.py::test_doctor_on_a_healthy_store_says_so_and_changes_nothing",
        "tests/engine/stores/test_repair.py::test_doctor_refuses_a_store_in_use",
        "tests/engine/stores/test_repair.py::test_doctor_repairs_a_bricked_store_and_keeps_every_good_point",
        "tests/engine/stores/test_repair.py::test_doctor_repairs_a_log_that_spans_segment_files",
        "tests/engine/stores/test_repair.py::test_flexmatch_doctor_unbricks_a_poisoned_knowledge_base",
        "tests/engine/stores/test_repair.py::test_reads_skip_an_unreadable_point_and_say_to_run_the_doctor",
        "tests/engine/stores/test_repair.py::test_the_rewrite_changes_only_the_bad_entry_and_keeps_checksums_valid",
        "tests/engine/stores/test_repair.py::test_the_scan_flags_the_entries_the_engine_cannot_read",
        "tests/engine/stores/test_stores.py::test_another_embedding_model_is_refused[edge]",
        "tests/engine/stores/test_stores.py::test_delete_in_one_tenant_leaves_the_other[edge]",
        "tests/engine/stores/test_stores.py::test_edge_store_builds_its_search_index_past_the_threshold",
        "tests/engine/stores/test_stores.py::test_edge_store_persists_and_refuses_a_second_open",
        "tests/engine/stores/test_stores.py::test_filters_and_ranking[edge]",
        "tests/engine/stores/test_stores.py::test_lexical_search_ranks_by_bm25[edge]",
        "tests/engine/stores/test_stores.py::test_points_without_vectors_are_never_search_hits[edge]",
        "tests/engine/stores/test_stores.py::test_replace_keeps_only_the_new_version[edge]",
        "tests/engine/stores/test_stores.py::test_retrieve_by_id_never_crosses_tenants[edge]",
        "tests/engine/stores/test_stores.py::test_scroll_lists_a_tenants_points[edge]",
        "tests/engine/stores/test_stores.py::test_search_batch_answers_each_search_in_order[edge]",
        "tests/engine/stores/test_stores.py::test_search_is_scoped_to_the_tenant[edge]",
        "tests/engine/stores/test_stores.py::test_tenant_payload_cannot_be_forged[edge]",
        "tests/engine/stores/test_stores.py::test_threads_may_write_and_search_at_once",
        "tests/engine/test_documents.py::test_a_write_race_fails_the_document_as_a_write_conflict",
        "tests/engine/test_documents.py::test_a_second_writer_waits_then_fails_clearly",
        "tests/engine/test_documents.py::test_check_store_opens_the_store_or_says_why_not",
        "tests/engine/test_documents.py::test_concurrent_runs_in_one_tenant_do_not_repair_each_other",
        "tests/engine/test_documents.py::test_document_listing_and_detail",
        "tests/engine/test_documents.py::test_interrupted_write_is_repaired_on_the_next_run",
        "tests/engine/test_embeddings.py::test_an_unfused_graph_is_served_with_a_warning",
        "tests/engine/test_embeddings.py::test_embedding_writes_nothing_under_home",
        "tests/engine/test_embeddings.py::test_int8_vectors_stay_close_to_fp32",
        "tests/engine/test_embeddings.py::test_onnx_vectors_match_the_torch_model",
        "tests/engine/test_embeddings.py::test_the_int8_graph_runs_integer_products",
        "tests/engine/test_embeddings.py::test_the_query_path_imports_no_torch",
        "tests/engine/test_embeddings.py::test_the_torch_reference_loads_quietly",
        "tests/engine/test_ingest_run.py::test_progress_knows_the_plan_from_the_first_call",
        "tests/engine/test_llm.py::test_concurrency_limit_is_honoured",
        "tests/engine/test_llm_credentials.py::test_a_local_server_without_a_key_is_called",
        "tests/engine/test_per_source_query.py::test_a_removed_sources_documents_stay_findable",
        "tests/engine/test_per_source_query.py::test_each_source_is_searched_in_its_own_form",
        "tests/engine/test_per_source_query.py::test_keyphrases_index_and_search_in_one_form",
        "tests/engine/test_per_source_query.py::test_sources_with_their_own_reranker_and_formatter",
        # two knowledge bases ingested through the questions chain and the model
        "tests/engine/test_question_ranking.py::test_a_question_of_the_wrong_chunk_no_longer_outranks_the_answering_sentence",
        "tests/engine/test_question_ranking.py::test_signals_are_the_calibrated_best_of_each_kind",
        "tests/engine/test_question_ranking.py::test_a_question_s_words_find_its_chunk_by_bm25",
        "tests/engine/test_question_ranking.py::test_a_generated_question_unlike_its_chunk_is_not_stored",
        "tests/engine/test_question_ranking.py::test_signals_are_the_same_when_each_is_searched_for",
        "tests/engine/test_retrieval.py::test_eval_command_end_to_end",
        "tests/engine/test_retrieval.py::test_metadata_filters",
        "tests/engine/test_retrieval.py::test_the_chunk_text_is_stored_once_per_chunk",
        "tests/inputs/test_crawl.py::test_a_crawl_follows_only_the_links_kept_and_says_so",
        "tests/inputs/test_crawl.py::test_a_page_that_fails_once_does_not_prune_what_lies_below_it",
        "tests/inputs/test_crawl.py::test_a_partial_crawl_keeps_the_validators_of_pages_it_did_not_reach",
        "tests/inputs/test_crawl.py::test_a_redirect_to_a_loopback_name_is_refused_on_its_hop",
        "tests/inputs/test_crawl.py::test_a_robots_delay_is_capped_and_the_cap_reported",
        "tests/inputs/test_crawl.py::test_a_robots_txt_over_512_kb_is_read_in_its_first_512_kb",
        "tests/inputs/test_crawl.py::test_a_seed_that_robots_txt_disallows_is_not_fetched",
        "tests/inputs/test_crawl.py::test_a_site_is_crawled_recrawled_for_free_and_pruned",
        "tests/inputs/test_crawl.py::test_loopback_is_refused_without_allow_hosts",
        "tests/inputs/test_crawl.py::test_max_depth_and_include_limit_what_is_read",
        "tests/inputs/test_crawl.py::test_max_pages_stops_the_crawl_and_says_it_is_incomplete",
        "tests/inputs/test_crawl.py::test_robots_crawl_delay_spaces_the_requests_to_a_host",
        "tests/inputs/test_crawl.py::test_the_configured_delay_applies_when_robots_asks_for_less",
        "tests/inputs/test_crawl.py::test_the_links_kept_from_a_page_are_capped_in_page_order",
        "tests/inputs/test_input_edges.py::test_a_deep_config_file_is_a_clear_error",
        "tests/inputs/test_input_edges.py::test_a_deep_yaml_fails_alone_in_an_ingest_with_its_own_reason",
        "tests/inputs/test_input_edges.py::test_identical_records_without_an_id_are_one_document",
        "tests/inputs/test_input_edges.py::test_records_ids_collide_by_value_and_are_reported",
        "tests/inputs/test_isolation.py::test_workers_die_with_a_killed_parent",
        # image-only PDFs, read by OCR
        "tests/inputs/parsing/test_dispatch.py::test_sample_document_parses[pdf_single_table.pdf]",
        "tests/inputs/parsing/test_dispatch.py::test_sample_document_parses[pdf_table-multi-row-column-cells.pdf]",
        # a message with PDF, Word and e-mail attachments, each read by its parser
        "tests/inputs/parsing/test_email.py::test_eml_attachments_by_their_own_parsers",
        "tests/inputs/test_source_types.py::test_a_plug_in_ingests_and_its_version_hint_skips_unchanged_items",
        "tests/inputs/test_source_types.py::test_an_unknown_type_is_named_with_the_known_ones",
        "tests/inputs/test_source_types.py::test_one_source_never_replaces_another_sources_document",
        "tests/inputs/test_source_types.py::test_unchanged_files_are_not_parsed_again",
        "tests/inputs/test_web.py::test_url_import_never_reads_local_paths",
        "tests/inputs/test_web.py::test_url_in_a_files_source_without_allow_list_is_refused",
        "tests/inputs/test_web.py::test_web_ingest_keeps_main_content_and_metadata",
        "tests/testing/test_fake_llm_command.py::test_the_command_refuses_a_public_address",
        "tests/testing/test_fake_llm_command.py::test_the_command_serves_tool_calls_latency_a_key_and_stats",
        "tests/test_client.py::test_a_file_over_the_servers_body_cap_fails_alone",
        "tests/test_client.py::test_async_ingest_and_query",
        "tests/test_client.py::test_documents_list_show_and_remove",
        "tests/test_client.py::test_errors_are_the_same_classes",
        "tests/test_client.py::test_ingest_a_folder_then_query_search_and_similar",
        "tests/test_client.py::test_jobs_can_be_followed",
        "tests/test_client.py::test_keys_and_permissions_are_service_errors",
        "tests/test_client.py::test_records_and_web_pages",
        "tests/test_client.py::test_the_server_sends_the_public_job_without_its_tenant",
        "tests/test_extras.py::test_ingest_without_the_local_model_extra",
        "tests/test_watching.py::test_a_python_watch_syncs_a_change_and_ends_when_stopped",
        "tests/test_watching.py::test_a_deletion_while_the_store_is_held_is_synced_once_it_is_free",
        "tests/test_watching.py::test_a_failed_sync_keeps_its_changes_and_is_tried_again",
        # [all] resolved against PyPI's JSON API for each Python (the wheels' METADATA
        # read by HTTP range requests): about 15 s for all four, run at once
        "tests/test_pythons.py::test_every_dependency_has_wheels_for",
        "tests/test_extras.py::test_mcp_without_the_mcp_extra",
        "tests/test_payloads.py::test_a_poisoned_corpus_row_leaves_the_tenant_usable_through_the_cli",
        "tests/test_payloads.py::test_hostile_corpus_rows_never_break_the_tenant",
        "tests/test_payloads.py::test_hostile_plugin_documents_never_break_the_tenant",
        "tests/test_payloads.py::test_hostile_records_never_break_the_tenant",
        "tests/test_payloads.py::test_hostile_uploads_never_break_the_tenant",
        "tests/test_payloads.py::test_metadata_is_stored_once_per_document_and_points_carry_what_filters_match",
        "tests/test_payloads.py::test_the_store_refuses_an_unreadable_point_before_writing_any",
        "tests/test_properties.py::test_any_bytes_parse_as_html_or_fail_clearly",
        "tests/test_properties.py::test_filters_are_checked_or_refused",
        "tests/test_properties.py::test_generated_html_keeps_its_words",
        "tests/test_properties.py::test_records_render_or_fail_with_a_clear_error",
        "tests/test_properties.py::test_the_boundary_is_never_inside_the_data",
        "tests/test_shared_state.py::test_a_replica_killed_mid_job_leaves_its_job_failed_for_the_others",
        "tests/test_shared_state.py::test_a_server_that_never_answers_fails_within_the_connect_timeout",
        "tests/test_shared_state.py::test_concurrent_writers_from_several_processes_lose_nothing",
        "tests/test_shared_state.py::test_concurrent_writers_from_several_processes_lose_nothing[default]",
    ],
    ("slow",),
)
# latency and memory bounds that hold on a quiet machine (see ``serial`` above)
TESTS.update(
    dict.fromkeys(
        [
            "tests/adapters/http/test_preview_limits.py::test_a_hostile_preview_is_stopped_and_stalls_no_one",
            "tests/adapters/http/test_hostile_inputs.py::test_pathological_parse_costs_a_worker_not_the_server",
            "tests/engine/test_linear_steps.py::test_a_minified_scripts_outline_is_linear",
            "tests/engine/test_linear_steps.py::test_the_near_duplicate_set_compares_few_vectors",
            # a second or so each: a trickling server outlasts the client's timeout
            "tests/test_client_limits.py::test_timeout_bounds_the_whole_request_against_a_trickle",
        ],
        ("slow", "serial"),
    )
)
TESTS["tests/testing/test_fake_llm.py::test_ten_calls_are_fast"] = ("serial",)
# two ingests of ~100 and ~300 thousand characters under tracemalloc (~45 s loaded)
TESTS["tests/engine/test_footprint.py::test_an_ingests_peak_memory_does_not_grow_with_the_run"] = (
    "slow",
    "serial",
)
TESTS["tests/test_sharing.py::test_queries_answer_within_a_second_during_a_long_ingest"] = (
    "serial",
)
TESTS[
    "tests/inputs/test_git_source.py::test_closing_the_blob_reader_does_not_wait_for_a_forked_worker"
] = ("serial",)


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _test(nodeid: str) -> str:
    """The node id without its parameters: ``module::test`` or ``module::Class::test``."""
    return nodeid.split("[", 1)[0]


def check_tables(items: list[pytest.Item]) -> None:
    """A ``TESTS`` entry whose module is collected but has no such test is a rename the
    table missed: refused, so the tier cannot rot silently."""
    modules = {_module(item.nodeid): item for item in items if isinstance(item, pytest.Function)}
    missing = []
    for entry in TESTS:
        item = modules.get(_module(entry))
        if item is None:
            continue
        obj: object = item.module
        for part in _test(entry).split("::")[1:]:
            obj = getattr(obj, part, None)
        if obj is None:
            missing.append(entry)
    if missing:
        raise pytest.UsageError(
            "tests/tiers.py names tests that do not exist (renamed?): " + ", ".join(missing)
        )


def markers_for(item: pytest.Item) -> set[str]:
    """The tier markers ``item`` gets from the tables (its own markers aside)."""
    names: set[str] = set()
    for fixture in getattr(item, "fixturenames", ()):
        names.update(FIXTURES.get(fixture, ()))
    names.update(MODULES.get(_module(item.nodeid), ()))
    names.update(TESTS.get(_test(item.nodeid), ()))
    names.update(TESTS.get(item.nodeid, ()))  # one case of a parametrised test
    own = {mark.name for mark in item.iter_markers()}
    if (names | own) & IMPLY_SLOW:
        names.add("slow")
    if (names | own) & IMPLY_SERIAL:
        names.add("serial")
    return names - own


def left_out(path: Path, root: Path, markexpr: str) -> bool:
    """Whether ``-m markexpr`` leaves out every test of the module at ``path`` whatever
    markers its tests carry of their own: then it is not even imported (``-m "not slow"``
    skips importing Playwright, Ray, ... for modules marked whole). Any doubt: collect it."""
    if not markexpr or path.suffix != ".py":
        return False
    try:
        marks = set(MODULES.get(path.relative_to(root).as_posix(), ()))
        if not marks:
            return False
        if marks & IMPLY_SLOW:
            marks.add("slow")
        if marks & IMPLY_SERIAL:
            marks.add("serial")
        from _pytest.mark.expression import Expression  # what -m itself evaluates

        expression = Expression.compile(markexpr)
        free = [name for name in MARKERS if name not in marks]
        for chosen in itertools.product((False, True), repeat=len(free)):
            has = marks | {name for name, on in zip(free, chosen, strict=True) if on}

            def matches(name: str, /, **_: Any) -> bool:
                return name in has  # noqa: B023 (used at once, in this iteration)

            if expression.evaluate(matches):
                return False
        return True
    except Exception:  # a private API changed, or an expression it cannot read
        return False


# a quick test slower than this is named at the end of the run (under load, quick tests
# take up to 2-3 s; one that takes more belongs in the tables above)
QUICK_LIMIT = 5.0
_overtime: dict[str, float] = {}


def note(report: pytest.TestReport) -> None:
    """Remember a test outside the slow tier that ran over ``QUICK_LIMIT``."""
    if report.when == "call" and report.duration > QUICK_LIMIT and "slow" not in report.keywords:
        _overtime[report.nodeid] = report.duration


def summary(reporter: Any) -> None:
    """Name the quick tests that were not quick, so whoever added them sees it."""
    if not _overtime:
        return
    reporter.write_sep("-", f"tests not marked slow that took over {QUICK_LIMIT:.0f} s")
    for nodeid, seconds in sorted(_overtime.items(), key=lambda item: -item[1]):
        reporter.write_line(f"{seconds:6.1f}s {nodeid}")
    reporter.write_line("mark them slow (tests/tiers.py) or make them faster")


def apply(items: list[pytest.Item]) -> None:
    check_tables(items)
    for item in items:
        for name in sorted(markers_for(item)):
            item.add_marker(getattr(pytest.mark, name))
