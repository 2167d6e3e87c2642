//! The `interval_ms` of imported rows: the time each row stands for.
//!
//! Logs carry no interval, only timestamps. A GPU's (or a process's)
//! interval is the median spacing of its consecutive samples: a logger
//! that samples every 30 s and stopped for a night still has a 30 s
//! interval, and the night stays unrecorded rather than one sample
//! standing for it. A series with a single sample takes the median over
//! the whole input; `--interval` overrides both.

use std::collections::HashMap;
use std::hash::Hash;
use std::path::Path;

use apron_schemas::Text;

use super::{HostRows, ImportError};

/// The median of the positive gaps between consecutive values of `ts`
/// (sorted here), in ms; `None` with fewer than two distinct values.
pub fn median_gap(ts: &mut [i64]) -> Option<i64> {
    ts.sort_unstable();
    let mut gaps: Vec<i64> = ts.windows(2).map(|w| w[1] - w[0]).filter(|&g| g > 0).collect();
    if gaps.is_empty() {
        return None;
    }
    let mid = gaps.len() / 2;
    Some(*gaps.select_nth_unstable(mid).1)
}

/// The interval of each key's series: `given` when set, else the median
/// gap of its timestamps, else `fallback`, else the median gap over every
/// series' gaps; `None` for a key when nothing tells (a single sample in
/// all).
pub fn intervals<K: Eq + Hash + Clone>(
    series: HashMap<K, Vec<i64>>,
    given: Option<i64>,
    fallback: Option<i64>,
) -> HashMap<K, Option<i64>> {
    if let Some(ms) = given {
        return series.into_keys().map(|k| (k, Some(ms))).collect();
    }
    let mut all_gaps = Vec::new();
    let mut out = HashMap::with_capacity(series.len());
    for (key, mut ts) in series {
        ts.sort_unstable();
        all_gaps.extend(ts.windows(2).map(|w| w[1] - w[0]).filter(|&g| g > 0));
        out.insert(key, median_gap(&mut ts));
    }
    let overall = if let Some(ms) = fallback {
        Some(ms)
    } else if all_gaps.is_empty() {
        None
    } else {
        let mid = all_gaps.len() / 2;
        Some(*all_gaps.select_nth_unstable(mid).1)
    };
    for v in out.values_mut() {
        if v.is_none() {
            *v = overall;
        }
    }
    out
}

/// Sets each row's `interval_ms` ([`super::interval`]); a series with a
/// single sample among `rows` takes `fallback` (the median gap over the
/// whole input, when `rows` are a part of it) where there is one.
pub fn set_intervals(
    path: &Path,
    rows: &mut HostRows,
    given: Option<i64>,
    fallback: Option<i64>,
) -> Result<(), ImportError> {
    let none = || ImportError::Input {
        what: path.display().to_string(),
        message: "cannot tell the sampling interval from one sample: give --interval".into(),
    };
    let to_i32 = |ms: i64| i32::try_from(ms).map_err(|_| none());
    let mut series: HashMap<Text, Vec<i64>> = HashMap::new();
    for g in &rows.gpus {
        series.entry(g.gpu_uuid.clone()).or_default().push(g.ts);
    }
    let gpu_iv = intervals(series, given, fallback);
    for g in &mut rows.gpus {
        g.interval_ms = to_i32(gpu_iv.get(&g.gpu_uuid).copied().flatten().ok_or_else(none)?)?;
    }
    let mut series: HashMap<(Text, i32), Vec<i64>> = HashMap::new();
    for p in &rows.procs {
        series.entry((p.gpu_uuid.clone(), p.pid)).or_default().push(p.ts);
    }
    let proc_iv = intervals(series, given, fallback);
    for p in &mut rows.procs {
        let key = (p.gpu_uuid.clone(), p.pid);
        p.interval_ms = to_i32(proc_iv.get(&key).copied().flatten().ok_or_else(none)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_gap_ignores_a_night_off_and_a_repeated_sample() {
        let mut ts = vec![0, 30_000, 60_000, 60_000, 90_000, 50_000_000, 50_030_000];
        assert_eq!(median_gap(&mut ts), Some(30_000));
        assert_eq!(median_gap(&mut [5]), None);
    }

    #[test]
    fn a_single_sample_takes_the_inputs_median_and_a_flag_wins() {
        let series = HashMap::from([("a", vec![0, 10_000, 20_000]), ("b", vec![7])]);
        let got = intervals(series.clone(), None, None);
        assert_eq!((got["a"], got["b"]), (Some(10_000), Some(10_000)));
        let got = intervals(series, Some(1_000), None);
        assert_eq!((got["a"], got["b"]), (Some(1_000), Some(1_000)));
        assert_eq!(intervals(HashMap::from([("x", vec![1])]), None, None)["x"], None);
    }
}
