//! The named reports' SQL, embedded from `queries/<name>.sql` so the binary
//! carries them and each file stays readable and runnable on its own.

/// `queries/pick.sql`: the least-loaded GPU of a host.
pub const PICK: &str = include_str!("../../queries/pick.sql");

/// `queries/alerts.sql`: the default alert rules at one moment.
pub const ALERTS: &str = include_str!("../../queries/alerts.sql");

/// `queries/reclaim.sql`: GPUs idle for a long stretch.
pub const RECLAIM: &str = include_str!("../../queries/reclaim.sql");

/// `queries/zombies.sql`: processes holding memory on idle GPUs.
pub const ZOMBIES: &str = include_str!("../../queries/zombies.sql");

/// `queries/gpu_minutes_from_raw.sql`: `gpu_minutes` rows from raw samples.
pub const GPU_MINUTES_FROM_RAW: &str = include_str!("../../queries/gpu_minutes_from_raw.sql");

/// `queries/proc_minutes_from_raw.sql`: `proc_minutes` rows from raw samples.
pub const PROC_MINUTES_FROM_RAW: &str = include_str!("../../queries/proc_minutes_from_raw.sql");

/// Every embedded query by name (the file name without `.sql`).
pub const ALL: &[(&str, &str)] = &[
    ("alerts", ALERTS),
    ("gpu_minutes_from_raw", GPU_MINUTES_FROM_RAW),
    ("pick", PICK),
    ("proc_minutes_from_raw", PROC_MINUTES_FROM_RAW),
    ("reclaim", RECLAIM),
    ("zombies", ZOMBIES),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sql_file_is_registered_and_documented() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../queries");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .expect("queries/ exists")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".sql").map(str::to_owned))
            .collect();
        on_disk.sort();
        let mut registered: Vec<String> = ALL.iter().map(|(n, _)| (*n).to_owned()).collect();
        registered.sort();
        assert_eq!(on_disk, registered, "every queries/*.sql is embedded, and only those");
        for (name, text) in ALL {
            let header: Vec<&str> = text.lines().take_while(|l| l.starts_with("--")).collect();
            let header = header.join("\n");
            assert!(header.starts_with(&format!("-- {name}:")), "{name}: header names the report");
            for section in ["Parameters:", "Output"] {
                assert!(header.contains(section), "{name}: header lacks {section}");
            }
        }
    }
}
