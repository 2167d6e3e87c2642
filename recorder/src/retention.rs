//! Retention: removes whole day partitions once they are older than the
//! table's retention, raw tables (`--retain-raw`, default 90 days) apart
//! from rollup tables (`--retain-rollups`, default 1095 days = 3 years).
//!
//! A day `date=D` of a table kept for `N` days expires when
//! `D < today − N days` (UTC): today and the `N` days before it are kept. A
//! retention is counted in whole days, rounded up. Only whole `date=`
//! partitions (or, for one host, whole `date=D/host=H` folders) are
//! removed, never single files; an expired folder is first renamed to a
//! hidden name, so readers see it vanish at once, then deleted. Whether to
//! remove is the pure [`is_expired`]; this module leaves compaction to
//! [`crate::compact`] and runs after it ([`crate::maintenance::run`]).
//!
//! A data folder that ships its days to object storage (it has a `.ship`
//! folder, [`crate::ship::markers`]) loses no day the bucket lacks: an
//! expired partition is removed only once its marker says its file is
//! shipped; until then it is held, and the run says how many it held.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use apron_schemas::folders::subfolders;
use apron_schemas::paths::{EXPIRED_PREFIX, expired_path, parse_date_dir_name, parse_host_dir_name};
use apron_schemas::time::DAY_MS;
use apron_schemas::{DataLayout, Table};
use apron_store::durable;
use chrono::NaiveDate;

use crate::data_lock::DataLock;
use crate::maintenance_error::MaintenanceError;
use crate::ship::markers;

/// Default retention of raw tables (`gpu_samples`, `proc_samples`), days.
pub const DEFAULT_RAW_DAYS: u32 = 90;

/// Default retention of rollup tables (`gpu_minutes`, `proc_minutes`), days.
pub const DEFAULT_ROLLUP_DAYS: u32 = 1095;

/// How long each kind of table is kept, in whole days.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Days of raw data kept before today.
    pub raw_days: u32,
    /// Days of rollups kept before today.
    pub rollup_days: u32,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        Self { raw_days: DEFAULT_RAW_DAYS, rollup_days: DEFAULT_ROLLUP_DAYS }
    }
}

impl RetentionPolicy {
    /// A policy from durations (`--retain-raw 90d`), each rounded up to
    /// whole days.
    pub fn from_durations(raw: Duration, rollups: Duration) -> Self {
        Self { raw_days: whole_days(raw), rollup_days: whole_days(rollups) }
    }

    /// Days `table` is kept before today.
    pub fn days(&self, table: Table) -> u32 {
        if table.kept_long() { self.rollup_days } else { self.raw_days }
    }
}

/// `d` in whole days, rounded up (a retention never keeps less than asked).
pub fn whole_days(d: Duration) -> u32 {
    let day = u128::try_from(DAY_MS).expect("a day is positive");
    u32::try_from(d.as_millis().div_ceil(day)).unwrap_or(u32::MAX)
}

/// Whether the day partition `date` of a table kept `keep_days` days has
/// expired on `today` (UTC): `date < today − keep_days`.
pub fn is_expired(date: NaiveDate, today: NaiveDate, keep_days: u32) -> bool {
    today.checked_sub_days(chrono::Days::new(u64::from(keep_days))).is_some_and(|cutoff| date < cutoff)
}

/// An expired partition that was removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// Its table.
    pub table: Table,
    /// Its day.
    pub date: NaiveDate,
    /// The host folder removed, or `None` when the whole day (every host) was.
    pub host: Option<String>,
    /// The folder that was removed.
    pub path: PathBuf,
}

/// What a retention run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    /// Partitions removed.
    pub removed: Vec<Removed>,
    /// Expired partitions kept because their files are not shipped yet
    /// (only in a data folder that ships).
    pub held: Vec<PathBuf>,
}

/// Removes, for every table, the day partitions that have expired on
/// `today` under `policy`: the whole `date=` folder, or only its
/// `host=HOST` folder when `host` is given (then the day folder too once
/// empty). In a data folder that ships, only shipped host folders go, one
/// by one, and the others are held. Also clears what an interrupted run
/// left behind. When this returns `Ok`, the removals are durable.
pub fn apply_retention(
    layout: &DataLayout,
    host: Option<&str>,
    today: NaiveDate,
    policy: &RetentionPolicy,
    _lock: &DataLock,
) -> Result<RetentionOutcome, MaintenanceError> {
    let pid = std::process::id();
    let ships = markers::ships(layout);
    let mut out = RetentionOutcome::default();
    for table in Table::ALL {
        let table_dir = layout.table_dir(table);
        let Some(entries) = subfolders(&table_dir)? else { continue };
        let keep = policy.days(table);
        for (name, path) in entries {
            if name.starts_with(EXPIRED_PREFIX) {
                remove_dir(&path)?;
                continue;
            }
            let Some(date) = parse_date_dir_name(&name) else { continue };
            // A host folder an interrupted run hid but did not delete.
            let hosts = subfolders(&path)?.unwrap_or_default();
            for (child, child_path) in &hosts {
                if child.starts_with(EXPIRED_PREFIX) {
                    remove_dir(child_path)?;
                }
            }
            if !is_expired(date, today, keep) {
                continue;
            }
            if !ships && host.is_none() {
                remove_partition(&path, pid)?;
                out.removed.push(Removed { table, date, host: None, path });
                continue;
            }
            for (child, host_dir) in hosts {
                let Some(h) = parse_host_dir_name(&child) else { continue };
                if host.is_some_and(|want| want != h) {
                    continue;
                }
                if ships && !markers::is_shipped(layout, table, date, h, None) {
                    out.held.push(host_dir);
                    continue;
                }
                remove_partition(&host_dir, pid)?;
                markers::remove(layout, table, date, h);
                out.removed.push(Removed { table, date, host: Some(h.to_owned()), path: host_dir });
            }
            // The day folder goes once its last host is gone; another
            // host's data keeps it.
            let _ = fs::remove_dir(&path);
        }
    }
    Ok(out)
}

/// Renames `dir` to a hidden name (readers see it vanish at once), makes
/// that durable, then deletes it.
fn remove_partition(dir: &Path, pid: u32) -> Result<(), MaintenanceError> {
    let hidden = expired_path(dir, pid);
    remove_dir(&hidden)?;
    fs::rename(dir, &hidden).map_err(MaintenanceError::io("hide the expired partition", dir))?;
    if let Some(parent) = dir.parent() {
        durable::sync_dir(parent).map_err(MaintenanceError::io("sync folder", parent))?;
    }
    remove_dir(&hidden)
}

fn remove_dir(dir: &Path) -> Result<(), MaintenanceError> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(MaintenanceError::Io { op: "remove", path: dir.to_path_buf(), source: e })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("valid date")
    }

    #[test]
    fn today_and_the_kept_days_before_it_stay() {
        let today = day("2026-12-01");
        // 90 days before 2026-12-01 is 2026-09-02.
        assert!(!is_expired(day("2026-12-01"), today, 90));
        assert!(!is_expired(day("2026-09-02"), today, 90));
        assert!(is_expired(day("2026-09-01"), today, 90));
        assert!(is_expired(day("2020-01-01"), today, 90));
        // A day in the future (a clock that was wrong) never expires.
        assert!(!is_expired(day("2027-01-01"), today, 90));
    }

    #[test]
    fn zero_days_keeps_only_today() {
        let today = day("2026-12-01");
        assert!(!is_expired(today, today, 0));
        assert!(is_expired(day("2026-11-30"), today, 0));
    }

    #[test]
    fn retention_rounds_up_to_whole_days_and_tells_raw_from_rollups() {
        assert_eq!(whole_days(Duration::from_secs(90 * 86_400)), 90);
        assert_eq!(whole_days(Duration::from_secs(36 * 3_600)), 2);
        assert_eq!(whole_days(Duration::from_secs(1)), 1);
        let p = RetentionPolicy::from_durations(Duration::from_secs(86_400), Duration::from_secs(3 * 86_400));
        assert_eq!(p.days(Table::GpuSamples), 1);
        assert_eq!(p.days(Table::ProcSamples), 1);
        assert_eq!(p.days(Table::GpuMinutes), 3);
        assert_eq!(p.days(Table::ProcMinutes), 3);
        assert_eq!(RetentionPolicy::default(), RetentionPolicy { raw_days: 90, rollup_days: 1095 });
    }

    #[test]
    fn expired_partitions_go_whole_and_others_stay() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        let today = day("2026-12-10");
        for table in Table::ALL {
            for d in ["2026-12-01", "2026-12-08", "2026-12-09", "2026-12-10"] {
                for h in ["a", "b"] {
                    let dir = layout.partition_dir(table, day(d), h);
                    fs::create_dir_all(&dir).expect("mkdir");
                    fs::write(dir.join("x.parquet"), b"x").expect("write");
                }
            }
        }
        // What a run killed between hiding and deleting leaves behind.
        let hidden = expired_path(&layout.partition_dir(Table::GpuSamples, day("2026-12-10"), "c"), 1);
        fs::create_dir_all(&hidden).expect("mkdir");
        let lock = DataLock::acquire(&layout).expect("lock");
        let policy = RetentionPolicy { raw_days: 1, rollup_days: 2 };
        // Host `a` only: `b` keeps its days (and so the day folders).
        let done = apply_retention(&layout, Some("a"), today, &policy, &lock).expect("retention");
        let removed = done.removed;
        // Two raw tables of two days each; three rollups and the events,
        // kept as long, of one day each.
        assert_eq!(removed.len(), 2 + 2 + 1 + 1 + 1 + 1, "{removed:?}");
        assert!(layout.partition_dir(Table::GpuEvents, day("2026-12-08"), "a").exists());
        assert!(done.held.is_empty(), "a folder that does not ship holds nothing");
        assert!(!layout.partition_dir(Table::GpuSamples, day("2026-12-08"), "a").exists());
        assert!(layout.partition_dir(Table::GpuSamples, day("2026-12-08"), "b").exists());
        assert!(layout.partition_dir(Table::GpuSamples, day("2026-12-09"), "a").exists());
        assert!(layout.partition_dir(Table::GpuMinutes, day("2026-12-08"), "a").exists());
        assert!(!layout.partition_dir(Table::GpuMinutes, day("2026-12-01"), "a").exists());
        assert!(!hidden.exists(), "leftovers are cleared");
        // Every host: whole day folders go.
        apply_retention(&layout, None, today, &policy, &lock).expect("retention");
        let days = |t: Table| -> Vec<String> {
            subfolders(&layout.table_dir(t))
                .expect("list")
                .unwrap_or_default()
                .into_iter()
                .map(|(n, _)| n)
                .collect()
        };
        assert_eq!(days(Table::ProcSamples), ["date=2026-12-09", "date=2026-12-10"]);
        assert_eq!(days(Table::ProcMinutes), ["date=2026-12-08", "date=2026-12-09", "date=2026-12-10"]);
        assert_eq!(days(Table::AllocMinutes), days(Table::GpuMinutes), "alloc_minutes is kept as a rollup");
        assert_eq!(
            days(Table::GpuEvents),
            days(Table::GpuMinutes),
            "gpu_events is kept as long as the rollups"
        );
    }

    #[test]
    fn a_folder_that_ships_keeps_expired_days_until_they_are_shipped() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        let (old, today) = (day("2026-12-01"), day("2026-12-10"));
        for h in ["a", "b"] {
            let dir = layout.partition_dir(Table::GpuSamples, old, h);
            fs::create_dir_all(&dir).expect("mkdir");
            fs::write(dir.join("x.parquet"), b"xyz").expect("write");
        }
        // `a` is shipped (its marker names its file), `b` is not.
        let marker = markers::Marker { name: "x.parquet".into(), size: 3, url: "s3://b/p".into() };
        markers::write(&layout, Table::GpuSamples, old, "a", &marker).expect("marks");
        let lock = DataLock::acquire(&layout).expect("lock");
        let policy = RetentionPolicy { raw_days: 1, rollup_days: 1 };
        let done = apply_retention(&layout, None, today, &policy, &lock).expect("retention");
        assert_eq!(done.removed.len(), 1, "{done:?}");
        assert_eq!(done.removed[0].host.as_deref(), Some("a"));
        assert_eq!(done.held, [layout.partition_dir(Table::GpuSamples, old, "b")]);
        assert!(!layout.partition_dir(Table::GpuSamples, old, "a").exists());
        assert!(layout.partition_dir(Table::GpuSamples, old, "b").exists());
        assert_eq!(markers::read(&layout, Table::GpuSamples, old, "a"), None, "its marker goes with it");
        // Once shipped, it goes too, and the day folder with it.
        markers::write(&layout, Table::GpuSamples, old, "b", &marker).expect("marks");
        let done = apply_retention(&layout, None, today, &policy, &lock).expect("retention");
        assert_eq!((done.removed.len(), done.held.len()), (1, 0), "{done:?}");
        assert!(!layout.date_dir(Table::GpuSamples, old).exists());
    }
}
