//! [`contract_suite!`](crate::contract_suite) and
//! [`lease_contract_suite!`](crate::lease_contract_suite): one `#[tokio::test]` per contract
//! function, each listed once.

/// Generates one `#[tokio::test]` per contract function for the factory expression given.
///
/// ```ignore
/// proxypool_pool::contract_suite!(proxypool_pool::contract::fixtures::MemoryFactory);
/// ```
#[macro_export]
macro_rules! contract_suite {
    ($factory:expr) => {
        $crate::contract_suite!(@each $factory;
            upsert::upsert_applies_ttl_and_safety_margin,
            upsert::upsert_rejects_bad_batch_without_writing,
            upsert::upsert_drops_bad_candidates_by_reason,
            upsert::upsert_enforces_max_size,
            upsert::upsert_refreshes_without_double_counting,
            upsert::upsert_incumbent_upstream_keeps_proxy,
            upsert::upsert_never_refreshes_extracted_back,
            upsert::upsert_operation_id_replay_counts_once,
            upsert::upsert_new_lifetime_after_hard_expiry,
            health::health_fetched_becomes_available_and_extractable,
            health::health_failures_leave_available_indexes,
            health::health_recovery_returns_to_indexes,
            health::health_ignores_stale_and_unknown_observations,
            health::health_due_for_check_orders_fetched_first,
            health::health_rejects_bad_batch_without_writing,
            extract::extract_partial_returns_what_exists,
            extract::extract_all_or_nothing_changes_nothing_on_shortfall,
            extract::extract_applies_each_filter,
            extract::extract_applies_health_freshness,
            extract::extract_keeps_gateway_reserve,
            extract::extract_never_hands_out_past_usable_until,
            extract::extract_replay_is_identical,
            extract::extract_key_reuse_with_other_body_conflicts,
            extract::extract_replay_ttl_capped_by_earliest_expiry,
            extract::extract_held_key_is_refused_after_its_replay_ends,
            extract::extract_lookup_is_scoped_to_client,
            extract::extract_scan_budget_exhausted_is_unavailable,
            extract::extract_concurrent_rounds_never_intersect,
            extract::extract_rejects_invalid_request_without_change,
            geo::extract_filters_by_city_state_asn_and_country,
            geo::extract_geo_filter_over_scan_budget_is_unavailable,
            geo::extract_geo_filters_are_part_of_the_request_identity,
            geo::extract_rejects_geo_filter_not_canonical,
            ownership::ownership_assign_requires_available_unowned,
            ownership::ownership_assign_and_extract_race_one_winner,
            ownership::ownership_renew_checks_worker_epoch_and_cuts_lease,
            ownership::ownership_drain_is_idempotent_and_bumps_epoch,
            ownership::ownership_ack_requires_idle,
            ownership::ownership_expire_is_batched_and_returns_to_pool,
            ownership::ownership_owned_by_lists_serving_only,
            ownership::ownership_release_orphaned_spares_live_sessions,
            usage::usage_counts_cumulative_totals_once,
            usage::usage_counts_extracted_proxies_per_upstream,
            usage::usage_buckets_age_out_and_totals_stay,
            usage::usage_invalid_report_counts_nothing,
            runtime::runtime_new_session_fences_old,
            runtime::runtime_report_sequence_replay_and_conflict,
            runtime::runtime_report_requires_acked_snapshot,
            runtime::runtime_report_expiry_means_unknown_capacity,
            runtime::runtime_counts_need_owner_and_epoch,
            runtime::runtime_stale_entry_renews_session_and_lapsed_lease_is_stale,
            runtime::runtime_replay_names_the_same_stale_entries,
            runtime::runtime_refused_report_with_stale_entries_changes_nothing,
            runtime::runtime_report_keeps_its_fleet_endpoint,
            inventory::inventory_counts_managed_and_slots,
            inventory::inventory_over_scan_budget_is_unavailable,
            maintenance::maintenance_sweep_is_bounded,
            maintenance::maintenance_ttl_churn_stays_bounded,
            admin::admin_worker_modes_round_trip,
            admin::admin_keyed_mode_changes_replay_their_answer,
            admin::admin_provider_status_replaces_per_upstream,
            admin::admin_bad_provider_status_changes_nothing,
            listing::listing_pages_in_id_order_with_owners,
            listing::listing_filters_by_upstream_and_status,
            listing::listing_shows_why_the_last_check_failed,
            listing::listing_rejects_bad_limits_and_changes_nothing,
            listing::listing_over_scan_budget_is_unavailable,
            cooldowns::cooldowns_merge_is_order_free_and_replay_changes_nothing,
            cooldowns::cooldowns_clear_drops_only_that_domain,
            cooldowns::cooldowns_bound_per_proxy_drops_what_the_reference_drops,
            cooldowns::cooldowns_on_unknown_proxies_are_ignored_and_counted,
            cooldowns::cooldowns_invalid_batch_changes_nothing,
            cooldowns::cooldowns_are_forgotten_at_forget_at,
            cooldowns::cooldowns_of_lists_by_proxy_in_the_given_order_then_domain,
            cooldowns::cooldowns_go_with_the_record,
            cooldowns::session_feedback_is_deduped_ordered_and_expires,
            cooldowns::session_feedback_keeps_the_newest_within_its_bound,
            cooldowns::may_report_answers_unknown_and_foreign_proxies_alike,
            cooldowns::return_extracted_only_by_the_holder_and_never_handed_out_again,
            cooldowns::extract_for_domain_skips_proxies_cooling_for_it,
            cooldowns::cooldowns_of_each_scope_are_merged_bounded_and_cleared_apart,
            cooldowns::cooldowns_project_scopes_per_proxy_are_bounded_as_the_reference_bounds_them,
            cooldowns::extract_for_domain_honours_shared_cooldowns_and_the_client_s_project_s,
            given_back::given_back_is_handed_to_nobody_until_its_hard_expiry,
            given_back::given_back_returns_only_as_a_new_generation_from_the_vendor,
            given_back::given_back_returns_with_a_later_issue_time_only,
            given_back::given_back_shows_no_credentials_in_its_extraction,
            given_back::lease_epoch_names_the_latest_lease_until_the_proxy_moves_on,
            tickets::tickets_key_is_made_once_and_kept,
            tickets::tickets_concurrent_callers_get_one_key,
            tickets::tickets_a_new_incarnation_has_a_new_key,
            versions::versions_start_at_zero_and_are_per_worker,
            versions::versions_move_with_every_ownership_write,
            versions::versions_move_with_changes_to_held_proxies,
            versions::versions_move_with_sessions_reports_and_feedback,
            journal::journal_names_each_change_of_a_held_proxy_once_with_its_holding,
            journal::journal_names_record_changes_of_a_held_proxy,
            journal::journal_keeps_other_workers_proxies_out,
            journal::journal_reads_from_the_current_version_asked_ids_and_a_limit,
            journal::journal_sessions_and_reports,
            journal::journal_forgets_past_its_cap_and_says_so,
            identity::identity_install_and_read_the_mark,
            identity::identity_another_identity_is_lost_and_starts_empty,
            identity::identity_generation_going_back_is_lost,
            identity::recovery_withholds_all_but_provably_new_proxies,
            identity::recovery_hold_never_outlives_the_proxy,
            identity::recovery_ends_when_acknowledged,
        );
    };
    (@each $factory:expr; $($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                $crate::contract::$module::$name(&$factory).await;
            }
        )*
    };
}

/// Generates the lease contract tests for a factory whose pools implement
/// [`LeaseStore`](proxypool_core::LeaseStore).
#[macro_export]
macro_rules! lease_contract_suite {
    ($factory:expr) => {
        $crate::contract_suite!(@each $factory;
            lease::lease_one_holder_at_a_time,
            lease::lease_renewal_keeps_token_and_takeover_bumps_it,
            lease::lease_concurrent_acquire_has_one_winner,
            fencing::fencing_refuses_every_write_of_an_older_term,
            fencing::fencing_refuses_a_lapsed_term_and_another_lease_s_token,
            fencing::fencing_compares_the_holder_and_tokens_never_repeat,
        );
    };
}
