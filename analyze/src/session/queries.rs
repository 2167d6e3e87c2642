//! The named reports' SQL, embedded from `queries/<name>.sql` so the binary
//! carries them and each file stays readable and runnable on its own.

/// `queries/pick.sql`: the least-loaded GPU of a host.
pub const PICK: &str = include_str!("../../../queries/pick.sql");

/// `queries/newest_sample.sql`: when a host was last sampled.
pub const NEWEST_SAMPLE: &str = include_str!("../../../queries/newest_sample.sql");

/// `queries/alerts.sql`: the default alert rules at one moment.
pub const ALERTS: &str = include_str!("../../../queries/alerts.sql");

/// `queries/reclaim.sql`: GPUs idle for a long stretch.
pub const RECLAIM: &str = include_str!("../../../queries/reclaim.sql");

/// `queries/zombies.sql`: processes holding memory on idle GPUs.
pub const ZOMBIES: &str = include_str!("../../../queries/zombies.sql");

/// `queries/starved.sql`: processes on idle GPUs that move data over PCIe.
pub const STARVED: &str = include_str!("../../../queries/starved.sql");

/// `queries/process_jobs.sql`: the pod and Slurm job of each process in a span.
pub const PROCESS_JOBS: &str = include_str!("../../../queries/process_jobs.sql");

/// `queries/gpu_minutes_from_raw.sql`: `gpu_minutes` rows from raw samples.
pub const GPU_MINUTES_FROM_RAW: &str = include_str!("../../../queries/gpu_minutes_from_raw.sql");

/// `queries/proc_minutes_from_raw.sql`: `proc_minutes` rows from raw samples.
pub const PROC_MINUTES_FROM_RAW: &str = include_str!("../../../queries/proc_minutes_from_raw.sql");

/// `queries/alloc_minute_states.sql`: every GPU-minute allocated to a pod or a Slurm job, with its holder and team.
pub const ALLOC_MINUTE_STATES: &str = include_str!("../../../queries/alloc_minute_states.sql");

/// `queries/gpu_minute_states.sql`: every GPU-minute with its activity, energy and state.
pub const GPU_MINUTE_STATES: &str = include_str!("../../../queries/gpu_minute_states.sql");

/// `queries/proc_minute_states.sql`: every process-minute with its memory, user and team.
pub const PROC_MINUTE_STATES: &str = include_str!("../../../queries/proc_minute_states.sql");

/// `queries/minute_costs.sql`: every GPU-minute priced, classified, attributed.
pub const MINUTE_COSTS: &str = include_str!("../../../queries/minute_costs.sql");

/// `queries/ledger_gpu_minutes.sql`: one day's `gpu_minutes` rows for the ledger.
pub const LEDGER_GPU_MINUTES: &str = include_str!("../../../queries/ledger_gpu_minutes.sql");

/// `queries/ledger_proc_minutes.sql`: one day's `proc_minutes` rows for the ledger.
pub const LEDGER_PROC_MINUTES: &str = include_str!("../../../queries/ledger_proc_minutes.sql");

/// `queries/ledger_alloc_minutes.sql`: one day's alloc_minutes rows, as the ledger reads them.
pub const LEDGER_ALLOC_MINUTES: &str = include_str!("../../../queries/ledger_alloc_minutes.sql");

/// `queries/coverage.sql`: what the data holds in a period.
pub const COVERAGE: &str = include_str!("../../../queries/coverage.sql");

/// `queries/gpu_models.sql`: GPU-hours per GPU model in a period.
pub const GPU_MODELS: &str = include_str!("../../../queries/gpu_models.sql");

/// `queries/samples_between.sql`: first and last raw sample in a span.
pub const SAMPLES_BETWEEN: &str = include_str!("../../../queries/samples_between.sql");

/// `queries/events.sql`: the GPUs' faults, per GPU and fault.
pub const EVENTS: &str = include_str!("../../../queries/events.sql");

/// `queries/down_faults.sql`: the events that may take a GPU out of service.
pub const DOWN_FAULTS: &str = include_str!("../../../queries/down_faults.sql");

/// `queries/job_timeline.sql`: one GPU's minutes over a job's time.
pub const JOB_TIMELINE: &str = include_str!("../../../queries/job_timeline.sql");

/// `queries/fault_alerts.sql`: the fault alert rules.
pub const FAULT_ALERTS: &str = include_str!("../../../queries/fault_alerts.sql");

/// `queries/spend.sql`: cost per team.
pub const SPEND: &str = include_str!("../../../queries/spend.sql");

/// `queries/budget_hours.sql`: each team's cost hour by hour, for budgets.
pub const BUDGET_HOURS: &str = include_str!("../../../queries/budget_hours.sql");

/// `queries/idle_cost.sql`: idle cost by team, user, host or GPU.
pub const IDLE_COST: &str = include_str!("../../../queries/idle_cost.sql");

/// `queries/windows.sql`: the hour-of-week profile.
pub const WINDOWS: &str = include_str!("../../../queries/windows.sql");

/// `queries/window_gpus.sql`: each GPU's idle share per hour of the week.
pub const WINDOW_GPUS: &str = include_str!("../../../queries/window_gpus.sql");

/// `queries/fleet_state.sql`: GPUs per state over time.
pub const FLEET_STATE: &str = include_str!("../../../queries/fleet_state.sql");

/// `queries/power.sql`: fleet power and energy over time.
pub const POWER: &str = include_str!("../../../queries/power.sql");

/// `queries/gpu_days.sql`: each physical GPU's busy share per day.
pub const GPU_DAYS: &str = include_str!("../../../queries/gpu_days.sql");

/// Every embedded query by name (the file name without `.sql`).
pub const ALL: &[(&str, &str)] = &[
    ("alerts", ALERTS),
    ("alloc_minute_states", ALLOC_MINUTE_STATES),
    ("budget_hours", BUDGET_HOURS),
    ("coverage", COVERAGE),
    ("down_faults", DOWN_FAULTS),
    ("events", EVENTS),
    ("fault_alerts", FAULT_ALERTS),
    ("fleet_state", FLEET_STATE),
    ("gpu_days", GPU_DAYS),
    ("gpu_minute_states", GPU_MINUTE_STATES),
    ("gpu_minutes_from_raw", GPU_MINUTES_FROM_RAW),
    ("gpu_models", GPU_MODELS),
    ("idle_cost", IDLE_COST),
    ("job_timeline", JOB_TIMELINE),
    ("ledger_alloc_minutes", LEDGER_ALLOC_MINUTES),
    ("ledger_gpu_minutes", LEDGER_GPU_MINUTES),
    ("ledger_proc_minutes", LEDGER_PROC_MINUTES),
    ("minute_costs", MINUTE_COSTS),
    ("newest_sample", NEWEST_SAMPLE),
    ("pick", PICK),
    ("power", POWER),
    ("process_jobs", PROCESS_JOBS),
    ("proc_minute_states", PROC_MINUTE_STATES),
    ("proc_minutes_from_raw", PROC_MINUTES_FROM_RAW),
    ("reclaim", RECLAIM),
    ("samples_between", SAMPLES_BETWEEN),
    ("spend", SPEND),
    ("starved", STARVED),
    ("window_gpus", WINDOW_GPUS),
    ("windows", WINDOWS),
    ("zombies", ZOMBIES),
];

/// The embedded query named `name`: a file name without `.sql` (`pick`,
/// `idle_cost`), as a command spells it (`idle-cost`), or with `.sql`.
pub fn named(name: &str) -> Option<&'static str> {
    let name = name.strip_suffix(".sql").unwrap_or(name).replace('-', "_");
    ALL.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

/// What a query answers: the first paragraph of its header comment, on one
/// line, without its leading `name:`.
pub fn summary(text: &str) -> String {
    let words: Vec<&str> = text
        .lines()
        .map_while(|l| l.strip_prefix("--"))
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .flat_map(str::split_whitespace)
        .collect();
    let line = words.join(" ");
    match line.split_once(": ") {
        Some((name, rest)) if !name.contains(' ') => rest.to_owned(),
        _ => line,
    }
}

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

    #[test]
    fn a_query_is_found_by_its_name_as_files_and_commands_spell_it() {
        assert_eq!(named("pick"), Some(PICK));
        assert_eq!(named("idle-cost"), Some(IDLE_COST));
        assert_eq!(named("idle_cost.sql"), Some(IDLE_COST));
        assert_eq!(named("nope"), None);
        assert_eq!(summary(PICK), "the least-loaded GPU of one host, for CUDA_VISIBLE_DEVICES.");
        assert!(summary(WINDOWS).starts_with("the fleet's week, hour by hour:"), "{}", summary(WINDOWS));
    }
}
