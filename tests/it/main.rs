//! apron's end-to-end tests, one module per area, linked into one test
//! binary: the support crate, DataFusion and the rest are linked once, and
//! `apron_tests::bin` builds the workspace binaries once for all of them.
//!
//! Run one area with `cargo test -p apron-tests --test it MODULE::` (for
//! example `--test it cli_snapshots::`), one test with its full name and
//! `-- --exact`.
//!
//! Four files are binaries of their own:
//!
//! - `tests/tick_allocations.rs` installs a counting global allocator;
//! - `tests/import.rs` and `tests/sql_out.rs` bound the peak memory of an
//!   `apron` they start, read from `wait4`'s rusage; std starts it with
//!   `posix_spawn`, which shares the test process's memory until `exec`,
//!   and Linux then counts the test process's high-water mark as the
//!   child's. The other tests here raise that mark to hundreds of MB;
//! - `tests/nvml.rs` is what the device check (`tests/device-check.sh`)
//!   carries to a GPU machine, small without DataFusion.

mod actions;
mod alerts;
mod allocations;
mod bad_input;
mod chart_series;
mod charts;
mod cli_snapshots;
mod completions;
mod config;
mod data_files;
mod demo;
mod deploy;
mod docs_paths;
mod durability;
mod faults;
mod first_run;
mod gpu_events;
mod identity_trust;
mod import_locking;
mod jobs;
mod kubernetes;
mod memory_limit;
mod metrics;
mod metrics_limits;
mod mig_capacity;
mod module_cycles;
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
mod slurm;
mod snapshot;
mod sql;
mod sql_file_tables;
mod sql_params;
mod sql_shell;
mod sql_show;
mod systemd_unit;
mod windows_cron;
mod written_files;
mod zombie_commands;
mod zombies;
