//! [`contract_suite!`](crate::contract_suite): one `#[tokio::test]` per contract function,
//! each listed once.

/// Generates one `#[tokio::test]` per contract function for the factory expression given.
///
/// ```ignore
/// proxypool_quota::contract_suite!(proxypool_quota::contract::fixtures::MemoryFactory);
/// ```
#[macro_export]
macro_rules! contract_suite {
    ($factory:expr) => {
        $crate::contract_suite!(@each $factory;
            admission::admits_up_to_the_limit_then_exceeds,
            admission::retry_after_never_exceeds_the_window,
            admission::limits_are_per_operation,
            admission::concurrent_distinct_receipts_admit_exactly_the_limit,
            replay::replayed_receipt_is_admitted_without_charge,
            replay::replay_is_admitted_after_the_window_filled_up,
            window::windows_are_aligned_to_their_length,
            window::window_expiry_resets_count_and_receipts,
            isolation::buckets_are_separate_per_project_subject_and_operation,
            per_call::clients_on_one_instance_are_charged_under_their_own_limits,
            per_call::lowered_limit_denies_new_receipts_and_replays_stay_admitted,
            per_call::raised_limit_admits_more_in_the_same_window,
            validation::invalid_input_is_rejected_and_writes_nothing,
            validation::longest_valid_inputs_are_stored_intact,
            validation::full_bucket_holds_a_thousand_longest_receipts,
            settle::decisions_say_whether_they_charged,
            settle::refund_undoes_exactly_one_charge,
            settle::refund_makes_room_and_can_empty_a_bucket,
            settle::spend_keeps_the_charge_and_frees_the_receipt,
            settle::settling_after_the_window_ended_changes_nothing,
            settle::invalid_settlements_are_rejected_and_write_nothing,
            settle::concurrent_charges_and_refunds_stay_exact,
            settle::concurrent_same_receipt_is_charged_once,
            ledger::ledger_entries_load_exactly_as_written,
            ledger::ledger_first_entry_is_written_once,
            ledger::ledger_replace_needs_the_current_identity,
            ledger::ledger_generation_only_rises_for_its_identity,
            ledger::ledger_pools_are_independent,
            ledger::ledger_concurrent_replacements_have_one_winner,
            ledger::ledger_invalid_input_is_rejected_and_writes_nothing,
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
