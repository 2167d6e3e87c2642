//! apron's end-to-end tests, one module per area, linked into one test
//! binary: the support crate, DataFusion and the rest are linked once, and
//! `apron_tests::bin` builds the workspace binaries once for all of them.
//!
//! Run one area with `cargo test -p apron-tests --test it MODULE::` (for
//! example `--test it cli_snapshots::`), one test with its full name and
//! `-- --exact`. `tests/tick_allocations.rs` is a binary of its own: it
//! installs a counting global allocator.

mod actions;
mod alerts;
mod bad_input;
mod chart_series;
mod charts;
mod cli_snapshots;
mod completions;
mod config;
mod data_files;
mod demo;
mod durability;
mod faults;
mod first_run;
mod identity_trust;
mod import;
mod import_locking;
mod memory_limit;
mod metrics;
mod metrics_limits;
mod mig_capacity;
mod module_cycles;
mod nvml;
mod pick;
mod portable;
mod queries;
mod reclaim;
mod reconcile;
mod record;
mod report;
mod report_browser;
mod reports;
mod rollups;
mod scenario_unknown;
mod secrets;
mod ship;
mod snapshot;
mod sql;
mod sql_file_tables;
mod sql_out;
mod sql_params;
mod sql_shell;
mod sql_show;
mod systemd_unit;
mod windows_cron;
mod written_files;
mod zombie_commands;
mod zombies;
