//! Faults: what went wrong with the GPUs over a period
//! (`queries/events.sql` over `gpu_events`), each fault with what it means,
//! the action it calls for and whether its GPU should be drained
//! ([`judge`]), XIDs by NVIDIA's catalogue ([`crate::faults`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use apron_schemas::gpu_events as kinds;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;
use datafusion::common::ScalarValue;

use super::{ReportContext, query, unreadable};
use crate::error::Error;
use crate::faults;
use crate::ledger::downtime::{DownStretch, DownSum};
use crate::output::Rows;
use crate::report::columns::{self, Columns, batch_of};
use crate::report::header::hours;
use crate::session::queries;

/// A contained ECC error (XID 94) this many times on one GPU in a period:
/// the memory is failing, drain it although each one only cost an app.
pub const REPEATED_CONTAINED_ECC: i64 = 2;

/// One fault of one GPU over the period.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRow {
    /// Host name.
    pub host: String,
    /// NVML index.
    pub gpu_index: i32,
    /// GPU (or MIG instance) UUID.
    pub gpu_uuid: String,
    /// `gpu_events.kind`.
    pub kind: String,
    /// The XID code, for kind `xid`.
    pub xid: Option<i32>,
    /// What it means.
    pub fault: String,
    /// What to do about it; empty when nothing.
    pub action: String,
    /// Whether the GPU should be drained (taken out of scheduling) for it.
    pub drain: bool,
    /// Events (or counter readings that moved).
    pub events: i64,
    /// The first, ms since the epoch.
    pub first_at: i64,
    /// The last, ms since the epoch.
    pub last_at: i64,
    /// How much the counter grew.
    pub increase: Option<i64>,
    /// The counter's newest reading.
    pub last_value: Option<i64>,
    /// What the source added.
    pub detail: Option<String>,
    /// The processes on the GPU in the minute of the last one.
    pub on_gpu: String,
    /// GPU-hours its faults took the GPU (and a partitioned GPU's MIG
    /// instances) out of service, until each next did work
    /// ([`crate::ledger::downtime`]); `None`: it took none.
    pub down_gpu_hours: Option<f64>,
    /// Their cost (currency): recorded minutes as priced, unrecorded time
    /// at the GPU's rate.
    pub down_cost: Option<f64>,
    /// Whether the GPU (or one of its instances) had not done work again by
    /// the end of the period's data.
    pub still_down: bool,
}

/// The faults of a period, the latest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Faults {
    /// One row per GPU and fault.
    pub rows: Vec<FaultRow>,
    /// What the time faults took adds up to ([`Faults::add_downtime`]).
    pub down: DownSum,
}

impl Faults {
    /// The GPUs to drain, as `host/index`, sorted.
    pub fn to_drain(&self) -> Vec<String> {
        let gpus: BTreeSet<(&str, i32)> =
            self.rows.iter().filter(|r| r.drain).map(|r| (r.host.as_str(), r.gpu_index)).collect();
        gpus.into_iter().map(|(h, i)| format!("{h}/{i}")).collect()
    }

    /// The hosts whose GPUs had a fault that can take a GPU out of service:
    /// those whose minutes [`Faults::add_downtime`] needs.
    pub fn down_hosts(&self) -> BTreeSet<String> {
        let may = |r: &FaultRow| {
            r.drain
                || [kinds::GPU_LOST, kinds::REMAP_PENDING, kinds::REMAP_FAILURE, kinds::RETIRED_PENDING]
                    .contains(&r.kind.as_str())
        };
        self.rows.iter().filter(|r| may(r)).map(|r| r.host.clone()).collect()
    }

    /// Adds to each row the stretches its faults began (matched by the
    /// fault's GPU, kind, XID and detail), and sums them.
    pub fn add_downtime(&mut self, stretches: &[DownStretch]) {
        for d in stretches {
            let f = &d.fault;
            let row = self.rows.iter_mut().find(|r| {
                r.host == f.host
                    && r.gpu_uuid == f.gpu_uuid
                    && r.kind == f.kind
                    && r.xid == f.xid
                    && r.detail == f.detail
            });
            if let Some(r) = row {
                r.down_gpu_hours = Some(r.down_gpu_hours.unwrap_or(0.0) + d.gpu_hours);
                r.down_cost = Some(r.down_cost.unwrap_or(0.0) + d.cost);
                r.still_down |= d.until_ms.is_none();
            }
        }
        self.down = DownSum::of(stretches);
    }

    /// The time faults took, in words: `faults took 12.5 GPU-hours (€30.10)`,
    /// with what of it was not recorded; `None` when they took none.
    pub fn downtime_phrase(&self, currency: &str) -> Option<String> {
        let d = &self.down;
        if d.gpu_hours <= 0.0 {
            return None;
        }
        let money = |x| apron_reports::money(x, currency);
        let mut s = format!("faults took {} GPU-hours ({})", hours(d.gpu_hours), money(d.cost));
        let unrecorded = d.gpu_hours - d.recorded_gpu_hours;
        if unrecorded >= 0.05 {
            s.push_str(&format!(
                ", {} GPU-hours of it unrecorded ({} at the GPUs' rate, not in the fleet cost)",
                hours(unrecorded),
                money(d.unrecorded_cost)
            ));
        }
        if d.still_down > 0 {
            s.push_str(&format!(
                "; {} not back at work by the end of the data",
                match d.still_down {
                    1 => "1 GPU".to_owned(),
                    n => format!("{n} GPUs"),
                }
            ));
        }
        Some(s)
    }

    /// The header's words: how many faults on how many GPUs, and which to
    /// drain.
    pub fn headline(&self) -> String {
        format!("Faults: {}", self.summary())
    }

    /// How many faults on how many GPUs, and which to drain.
    pub fn summary(&self) -> String {
        let gpus: BTreeSet<(&str, &str)> =
            self.rows.iter().map(|r| (r.host.as_str(), r.gpu_uuid.as_str())).collect();
        let events: i64 = self.rows.iter().map(|r| r.events).sum();
        if self.rows.is_empty() {
            return "none recorded in the period".into();
        }
        let drain = self.to_drain();
        let drain = if drain.is_empty() {
            "none to drain".to_owned()
        } else {
            format!("to drain: {}", drain.join(", "))
        };
        format!("{events} events on {} GPUs; {drain}", gpus.len())
    }

    /// [`Faults::summary`] and then the time faults took, in `currency`.
    pub fn summary_with_downtime(&self, currency: &str) -> String {
        match self.downtime_phrase(currency) {
            Some(took) => format!("{}; {took}", self.summary()),
            None => self.summary(),
        }
    }
}

/// What a fault means, the action it calls for and whether its GPU should
/// be drained, from its kind, XID code, how often it happened, a counter's
/// growth and newest reading; `recovered`: the GPU answered again after
/// its last `gpu_lost`.
pub fn judge(
    kind: &str,
    xid: Option<i32>,
    events: i64,
    (increase, last_value): (Option<i64>, Option<i64>),
    recovered: bool,
) -> (String, String, bool) {
    let say = |fault: &str, action: &str, drain: bool| (fault.to_owned(), action.to_owned(), drain);
    let set = last_value.is_some_and(|v| v > 0);
    match kind {
        kinds::XID => {
            let Some(code) = xid else { return say("XID with no code", "", false) };
            match u32::try_from(code).ok().and_then(faults::xid) {
                Some(x) => {
                    let repeated = code == 94 && events >= REPEATED_CONTAINED_ECC;
                    let fault = format!("XID {code}: {}", x.meaning);
                    let action = if repeated {
                        format!("{} (repeated: drain and reset the GPU)", x.action)
                    } else {
                        x.action.clone()
                    };
                    (fault, action, x.fatal == Some(true) || repeated)
                }
                None => (format!("XID {code}: not in NVIDIA's XID catalogue"), String::new(), false),
            }
        }
        kinds::ECC_DBE => say("double-bit ECC error (uncorrectable)", "drain; reset the GPU", true),
        kinds::ECC_SBE => say("single-bit ECC error (corrected)", "", false),
        kinds::GPU_LOST if recovered => say("GPU stopped answering; it answered again", "", false),
        kinds::GPU_LOST => say(
            "GPU stopped answering (lost, or hung in the driver)",
            "drain; reset the GPU or reboot the node",
            true,
        ),
        kinds::GPU_BACK => say("GPU answered again after it was lost", "", false),
        kinds::ECC_UNCORRECTED => {
            let grew = increase.is_some_and(|d| d > 0) || (increase.is_none() && set);
            say("uncorrectable ECC errors since the driver loaded", "drain; reset the GPU", grew)
        }
        kinds::ECC_UNCORRECTED_AGGREGATE => say("uncorrectable ECC errors over the GPU's life", "", false),
        kinds::ECC_CORRECTED | kinds::ECC_CORRECTED_AGGREGATE => say("corrected ECC errors", "", false),
        kinds::REMAP_PENDING if set => {
            say("a row remapping waits for a GPU reset", "drain; reset the GPU when it is idle", true)
        }
        kinds::REMAP_PENDING => say("a pending row remapping was applied", "", false),
        kinds::REMAP_FAILURE if set => {
            say("a row remapping failed", "drain; the GPU needs service (RMA)", true)
        }
        kinds::REMAP_FAILURE => say("row remapping failure cleared", "", false),
        kinds::REMAPPED_CORRECTABLE | kinds::REMAPPED_UNCORRECTABLE => say("memory rows remapped", "", false),
        kinds::RETIRED_PENDING if set => {
            say("a page retirement waits for a reboot", "drain; reboot the node when it is idle", true)
        }
        kinds::RETIRED_PENDING => say("a pending page retirement was applied", "", false),
        kinds::RETIRED_SBE | kinds::RETIRED_DBE => say("memory pages retired", "", false),
        kinds::PCIE_REPLAY => {
            say("PCIe replays (link retransmissions)", "check the slot and riser if it keeps growing", false)
        }
        kinds::NVLINK_ERRORS => say("NVLink errors", "check the link if it keeps growing", false),
        kinds::POWER_SOURCE => say("power source changed", "", false),
        kinds::MIG_CONFIG => say("MIG configuration changed", "", false),
        kinds::PSTATE => say("performance state changed", "", false),
        kinds::CLOCK => say("clocks changed", "", false),
        other => (format!("{other}: not a kind this build knows"), String::new(), false),
    }
}

/// The faults of `report`'s period.
pub async fn faults(report: &ReportContext) -> Result<Faults, Error> {
    // No event recorded anywhere (no `gpu_events` files, none in the
    // write-ahead log): nothing to read. The query would still plan its
    // join with `proc_minutes` over every file of the period (5 s and
    // 250 MiB for a month of 4,096 GPUs).
    if !report.session.tables().contains(&apron_schemas::Table::GpuEvents) {
        return Ok(Faults::default());
    }
    let at = |ms: i64| ScalarValue::TimestampMillisecond(Some(ms), Some(Arc::from("UTC")));
    let params = vec![at(report.period.start_ms), at(report.period.end_ms)];
    let batch = query(&report.session, queries::EVENTS, params).await?;
    read(&batch).map_err(unreadable)
}

fn read(batch: &RecordBatch) -> Result<Faults, ArrowError> {
    let c = Columns::of(batch);
    let (host, gpu_index, gpu_uuid, kind) =
        (c.text("host")?, c.i32("gpu_index")?, c.text("gpu_uuid")?, c.text("kind")?);
    let (xid, detail, events) = (c.i32_opt("xid")?, c.text_opt("detail")?, c.i64("events")?);
    let (first_at, last_at) = (c.timestamp_ms("first_at")?, c.timestamp_ms("last_at")?);
    let (increase, last_value, on_gpu) =
        (c.i64_opt("increase")?, c.i64_opt("last_value")?, c.text("on_gpu")?);
    let back_after = |i: usize| {
        (0..c.len()).any(|j| {
            kind[j] == kinds::GPU_BACK
                && host[j] == host[i]
                && gpu_uuid[j] == gpu_uuid[i]
                && last_at[j] >= last_at[i]
        })
    };
    let rows = (0..c.len())
        .map(|i| {
            let recovered = kind[i] == kinds::GPU_LOST && back_after(i);
            let (fault, action, drain) =
                judge(&kind[i], xid[i], events[i], (increase[i], last_value[i]), recovered);
            FaultRow {
                host: host[i].clone(),
                gpu_index: gpu_index[i],
                gpu_uuid: gpu_uuid[i].clone(),
                kind: kind[i].clone(),
                xid: xid[i],
                fault,
                action,
                drain,
                events: events[i],
                first_at: first_at[i],
                last_at: last_at[i],
                increase: increase[i],
                last_value: last_value[i],
                detail: detail[i].clone(),
                on_gpu: on_gpu[i].clone(),
                down_gpu_hours: None,
                down_cost: None,
                still_down: false,
            }
        })
        .collect();
    Ok(Faults { rows, down: DownSum::default() })
}

impl Rows for Faults {
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r = &self.rows;
        batch_of(vec![
            ("host", columns::text(r.iter().map(|x| x.host.as_str()))),
            ("gpu_index", columns::int32(r.iter().map(|x| x.gpu_index))),
            ("gpu_uuid", columns::text(r.iter().map(|x| x.gpu_uuid.as_str()))),
            ("kind", columns::text(r.iter().map(|x| x.kind.as_str()))),
            ("xid", columns::int32(r.iter().map(|x| x.xid))),
            ("fault", columns::text(r.iter().map(|x| x.fault.as_str()))),
            ("action", columns::text(r.iter().map(|x| x.action.as_str()))),
            ("drain", columns::boolean(r.iter().map(|x| x.drain))),
            ("events", columns::int64(r.iter().map(|x| x.events))),
            ("first_at", columns::timestamp_ms(r.iter().map(|x| x.first_at))),
            ("last_at", columns::timestamp_ms(r.iter().map(|x| x.last_at))),
            ("increase", columns::int64(r.iter().map(|x| x.increase))),
            ("last_value", columns::int64(r.iter().map(|x| x.last_value))),
            ("detail", columns::text(r.iter().map(|x| x.detail.as_deref()))),
            ("on_gpu", columns::text(r.iter().map(|x| x.on_gpu.as_str()))),
            ("down_gpu_hours", columns::float(r.iter().map(|x| x.down_gpu_hours))),
            ("down_cost", columns::float(r.iter().map(|x| x.down_cost))),
            ("still_down", columns::boolean(r.iter().map(|x| x.still_down))),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_judged_by_kind_code_repetition_and_state() {
        let j = |kind: &str, xid: Option<i32>, events: i64, inc: Option<i64>, last: Option<i64>| {
            judge(kind, xid, events, (inc, last), false)
        };
        let (fault, action, drain) = j("xid", Some(79), 1, None, None);
        assert_eq!(
            (fault.as_str(), action.as_str(), drain),
            ("XID 79: GPU has fallen off the bus", "RESTART_BM", true)
        );
        assert!(!j("xid", Some(94), 1, None, None).2, "one contained ECC error costs the app only");
        assert!(j("xid", Some(94), 2, None, None).2, "repeated, the memory is failing");
        assert!(!j("xid", Some(13), 9, None, None).2, "an application's fault, however often");
        let unknown = j("xid", Some(9999), 1, None, None);
        assert_eq!((unknown.0.as_str(), unknown.2), ("XID 9999: not in NVIDIA's XID catalogue", false));
        assert!(j("ecc_dbe", None, 1, None, None).2);
        assert!(!j("ecc_sbe", None, 40, None, None).2);
        assert!(j("remap_pending", None, 1, Some(1), Some(1)).2);
        assert!(!j("remap_pending", None, 2, Some(0), Some(0)).2, "set, then cleared by a reset");
        assert!(j("remap_failure", None, 1, Some(1), Some(1)).2);
        assert!(j("ecc_uncorrected", None, 1, Some(2), Some(5)).2);
        assert!(j("ecc_uncorrected", None, 1, None, Some(3)).2, "found at the first reading");
        assert!(!j("ecc_uncorrected_aggregate", None, 1, Some(2), Some(5)).2);
        assert!(j("gpu_lost", None, 1, None, None).2);
        assert!(!judge("gpu_lost", None, 1, (None, None), true).2, "it answered again");
        assert!(!j("pcie_replay", None, 3, Some(40), Some(40)).2);
    }

    #[test]
    fn every_fault_that_takes_a_gpu_down_calls_for_draining_it() {
        use apron_schemas::gpu_events::takes_gpu_down;
        let mut kinds_seen = 0;
        let xids = [None, Some(13), Some(31), Some(48), Some(79), Some(94), Some(95), Some(9999)];
        let numbers = [None, Some(0), Some(1), Some(3)];
        for kind in kinds::COUNTER_KINDS.iter().chain(&kinds::EVENT_KINDS).chain(&kinds::ANSWER_KINDS) {
            for xid in xids {
                for value in numbers {
                    for delta in numbers {
                        if takes_gpu_down(kind, xid, value, delta) {
                            kinds_seen += 1;
                            let (fault, _, drain) = judge(kind, xid, 1, (delta, value), false);
                            assert!(drain, "{kind} {xid:?} {value:?} {delta:?}: {fault}");
                        }
                    }
                }
            }
        }
        assert!(kinds_seen > 0);
        assert!(takes_gpu_down("xid", Some(79), None, None) && !takes_gpu_down("xid", Some(13), None, None));
        assert!(!takes_gpu_down("ecc_uncorrected", None, Some(3), None), "a first reading is no new fault");
        assert!(!takes_gpu_down("gpu_back", None, Some(60), None));
    }
}
