//! What Slurm says about a job, parsed from `scontrol -d -o show job ID`
//! (one line per job record; `-d` adds the per-node groups
//! `Nodes=… CPU_IDs=… Mem=… GRES=gpu:2(IDX:0-1)`) and the job ids of
//! `squeue --noheader --format=%A`. Pure functions: running the commands
//! is [`super::command`]'s job, caching the answers [`super`]'s.
//!
//! The format is Slurm's `slurm_sprint_job_info` (src/scontrol/info_job.c;
//! src/api/job_info.c before 24.x): `JobId=N … JobName=NAME UserId=USER(UID)
//! GroupId=… MCS_label=… Priority=… Nice=… Account=ACCOUNT QOS=… JobState=STATE
//! … Partition=PARTITION … NodeList=HOSTLIST … JOB_GRES=… Nodes=HOSTLIST
//! CPU_IDs=… Mem=… GRES=… … MinCPUsNode=…`, fields separated by single
//! spaces in one-line mode. Slurm before 19.05 wrote `GRES_IDX=gpu(IDX:0-1)`
//! instead of `GRES=`; both are read.
//!
//! Values a user chooses (the job name, printed before `UserId=`; the
//! comment, command and paths, printed after the node groups) may hold
//! spaces and text shaped like fields. Slurm prints each field read here
//! exactly once, in a fixed order, so a record in which one of them
//! appears twice, or out of order, is refused as ambiguous rather than
//! read: a job named `x Account=finance` is not billed to `finance`.

use apron_schemas::Text;

use super::hostlist;

/// A job as Slurm describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmJob {
    /// `JobId=`: the job's own id (an array task's is its own, not the
    /// array's).
    pub job_id: String,
    /// The user's name from `UserId=NAME(UID)`; `None` when Slurm could
    /// not name the uid (it then prints the number as the name).
    pub user: Option<Text>,
    /// The uid from `UserId=NAME(UID)`.
    pub uid: Option<u32>,
    /// `Account=`; `None` when Slurm prints `(null)` (no accounting).
    pub account: Option<Text>,
    /// `Partition=`.
    pub partition: Option<Text>,
    /// `JobState=`, e.g. `RUNNING`, `COMPLETED`.
    pub state: String,
    /// `NodeList=`: the job's nodes as a Slurm host list; `(null)` while
    /// pending.
    pub node_list: String,
    /// The per-node groups `scontrol -d` prints, in order.
    pub node_groups: Vec<NodeGroup>,
}

/// One `Nodes=HOSTLIST … GRES=…` group of `scontrol -d`: nodes with the
/// same allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroup {
    /// The group's nodes, a Slurm host list.
    pub nodes: String,
    /// The GPU indexes Slurm allocated on each of these nodes (`IDX` of
    /// the `gpu` GRES, any type), ascending; empty when none (no GRES, or
    /// a count without indexes).
    pub gpus: Vec<u32>,
}

impl SlurmJob {
    /// The GPU indexes (Slurm's `IDX`) the job holds on `node`, ascending;
    /// empty when it holds none there, or is not there.
    pub fn gpus_on(&self, node: &str) -> Vec<u32> {
        self.node_groups
            .iter()
            .find(|g| hostlist::contains(&g.nodes, node))
            .map(|g| g.gpus.clone())
            .unwrap_or_default()
    }

    /// Whether Slurm says the job runs now (`RUNNING`, or `COMPLETING`
    /// while its processes are still being ended).
    pub fn running(&self) -> bool {
        matches!(self.state.as_str(), "RUNNING" | "COMPLETING")
    }
}

/// Why a job's record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// No record of the job asked about in the output.
    #[error("no record of job {job_id} in scontrol's output")]
    NoRecord {
        /// The job asked about.
        job_id: String,
    },
    /// A field Slurm always prints is missing.
    #[error("scontrol's record of job {job_id} has no {field}= field")]
    Missing {
        /// The job asked about.
        job_id: String,
        /// The field's name.
        field: &'static str,
    },
    /// A field appears twice, or out of Slurm's order: a value the user
    /// chose (the job name, a comment) imitates it.
    #[error(
        "scontrol's record of job {job_id} is ambiguous: {field}= appears twice or out of order \
         (a job name or comment imitating Slurm's fields?)"
    )]
    Ambiguous {
        /// The job asked about.
        job_id: String,
        /// The field's name.
        field: &'static str,
    },
}

/// The fields read, in the order Slurm prints them.
const ORDERED: [&str; 6] = ["JobId", "UserId", "Account", "JobState", "Partition", "NodeList"];

/// Reads job `job_id`'s record out of `scontrol -d -o show job JOB_ID`'s
/// standard output: one line per record (an array's first task may bring
/// its siblings' lines; the one whose `JobId=` is `job_id` is read).
pub fn parse_job(output: &str, job_id: &str) -> Result<SlurmJob, ParseError> {
    let line = output
        .lines()
        .find(|l| l.split_ascii_whitespace().next().and_then(|t| t.strip_prefix("JobId=")) == Some(job_id))
        .ok_or_else(|| ParseError::NoRecord { job_id: job_id.to_owned() })?;
    let tokens: Vec<(&str, &str)> =
        line.split_ascii_whitespace().map(|t| t.split_once('=').unwrap_or((t, ""))).collect();
    let at = |field: &'static str| -> Result<usize, ParseError> {
        let mut found = tokens.iter().enumerate().filter(|(_, (k, _))| *k == field).map(|(i, _)| i);
        let first = found.next().ok_or_else(|| ParseError::Missing { job_id: job_id.to_owned(), field })?;
        match found.next() {
            Some(_) => Err(ParseError::Ambiguous { job_id: job_id.to_owned(), field }),
            None => Ok(first),
        }
    };
    let mut positions = [0usize; ORDERED.len()];
    for (slot, field) in positions.iter_mut().zip(ORDERED) {
        *slot = at(field)?;
    }
    if let Some(i) = (1..ORDERED.len()).find(|&i| positions[i] <= positions[i - 1]) {
        return Err(ParseError::Ambiguous { job_id: job_id.to_owned(), field: ORDERED[i] });
    }
    let value = |i: usize| tokens[positions[i]].1;
    let (user, uid) = parse_user(value(1));
    // The node groups lie between NodeList= and MinCPUsNode= (always
    // printed after them); a name or comment cannot reach in between.
    let end = match at("MinCPUsNode") {
        Ok(end) if end > positions[5] => end,
        Ok(_) => return Err(ParseError::Ambiguous { job_id: job_id.to_owned(), field: "MinCPUsNode" }),
        Err(ParseError::Missing { .. }) => tokens.len(),
        Err(e) => return Err(e),
    };
    let mut node_groups: Vec<NodeGroup> = Vec::new();
    for (key, value) in &tokens[positions[5] + 1..end] {
        match *key {
            "Nodes" => node_groups.push(NodeGroup { nodes: (*value).to_owned(), gpus: Vec::new() }),
            "GRES" | "GRES_IDX" => {
                if let Some(group) = node_groups.last_mut() {
                    group.gpus = gpu_indexes(value);
                }
            }
            _ => {}
        }
    }
    Ok(SlurmJob {
        job_id: job_id.to_owned(),
        user,
        uid,
        account: named(value(2)),
        partition: named(value(4)),
        state: value(3).to_owned(),
        node_list: value(5).to_owned(),
        node_groups,
    })
}

/// `None` for Slurm's empty values (`(null)`, empty), else the value.
fn named(value: &str) -> Option<Text> {
    (!value.is_empty() && value != "(null)").then(|| value.into())
}

/// `USER(UID)` of `UserId=`: the name (`None` when Slurm could not name
/// the uid and printed the number instead) and the uid.
fn parse_user(value: &str) -> (Option<Text>, Option<u32>) {
    let Some((name, rest)) = value.split_once('(') else { return (named(value), None) };
    let uid = rest.strip_suffix(')').and_then(|u| u.parse().ok());
    let name = if uid.is_some() && name == rest.trim_end_matches(')') { None } else { named(name) };
    (name, uid)
}

/// The GPU indexes of a per-node GRES value, e.g. `gpu:a100:2(IDX:0-1),
/// nic:1(IDX:0)` → [0, 1]; `gpu(IDX:0,2)` (before 19.05) → [0, 2];
/// `gpu(CNT:2)` (a count without indexes) → []. Only the `gpu` GRES
/// counts, whatever its type.
pub fn gpu_indexes(value: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0u32, 0);
    let mut entries = Vec::new();
    for (i, c) in value.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                entries.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    entries.push(&value[start..]);
    for entry in entries {
        let (head, detail) = entry.split_once('(').unwrap_or((entry, ""));
        if head.split(':').next() != Some("gpu") {
            continue;
        }
        if let Some(list) = detail.strip_suffix(')').and_then(|d| d.strip_prefix("IDX:")) {
            out.extend(index_list(list));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// `0-1,3` → [0, 1, 3]; `N/A` and anything malformed → [].
fn index_list(list: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for range in list.split(',') {
        let (low, high) = range.split_once('-').unwrap_or((range, range));
        let (Ok(lo), Ok(hi)) = (low.parse::<u32>(), high.parse::<u32>()) else { return Vec::new() };
        // A node has at most a few dozen GPUs; a wild range is not one.
        if hi < lo || hi - lo > 1024 {
            return Vec::new();
        }
        out.extend(lo..=hi);
    }
    out
}

/// Whether scontrol's standard error says Slurm does not know the job
/// (purged after it ended, or never was): `slurm_load_jobs error: Invalid
/// job id specified`.
pub fn is_unknown_job(stderr: &str) -> bool {
    stderr.contains("Invalid job id specified")
}

/// The job ids of `squeue --noheader --format=%A` (one per line; `%A` is
/// unique for each array task).
pub fn parse_job_ids(output: &str) -> Vec<String> {
    output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests;
