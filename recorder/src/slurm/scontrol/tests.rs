//! Records in the layout of Slurm's `slurm_sprint_job_info`
//! (src/scontrol/info_job.c) in one-line mode with details (`-d -o`).

use super::*;

/// A one-line `scontrol -d -o show job` record with the given middle parts.
fn record(
    job: &str,
    name: &str,
    account: &str,
    state: &str,
    nodes: &str,
    groups: &str,
    comment: &str,
) -> String {
    format!(
        "JobId={job} JobName={name} UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A \
         Priority=4294901758 Nice=0 Account={account} QOS=normal JobState={state} Reason=None \
         Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 DerivedExitCode=0:0 \
         RunTime=00:10:05 TimeLimit=1-00:00:00 TimeMin=N/A SubmitTime=2026-12-03T10:00:00 \
         EligibleTime=2026-12-03T10:00:00 AccrueTime=2026-12-03T10:00:00 StartTime=2026-12-03T10:00:01 \
         EndTime=2026-12-04T10:00:01 Deadline=N/A SuspendTime=None SecsPreSuspend=0 \
         LastSchedEval=2026-12-03T10:00:01 Scheduler=Main Partition=gpu AllocNode:Sid=login1:12345 \
         ReqNodeList=(null) ExcNodeList=(null) NodeList={nodes} BatchHost=node07 NumNodes=1 NumCPUs=16 \
         NumTasks=1 CPUs/Task=16 ReqB:S:C:T=0:0:*:* ReqTRES=cpu=16,mem=64G,node=1,billing=16,gres/gpu=2 \
         AllocTRES=cpu=16,mem=64G,node=1,billing=16,gres/gpu=2 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* \
         CoreSpec=* {groups}MinCPUsNode=16 MinMemoryNode=64G MinTmpDiskNode=0 Features=(null) \
         DelayBoot=00:00:00 OverSubscribe=OK Exclusive=NO Contiguous=0 Licenses=(null) \
         LicensesAlloc=(null) Network=(null) Command=/home/alice/train.sh WorkDir=/home/alice \
         Comment={comment} StdErr=/home/alice/slurm-{job}.out StdIn=/dev/null \
         StdOut=/home/alice/slurm-{job}.out TresPerNode=gres/gpu:2\n"
    )
}

#[test]
fn a_running_job_on_one_node() {
    let out = record(
        "4242",
        "train",
        "vision",
        "RUNNING",
        "node07",
        "JOB_GRES=gpu:2 Nodes=node07 CPU_IDs=0-15 Mem=65536 GRES=gpu:2(IDX:0-1) ",
        "none",
    );
    let job = parse_job(&out, "4242").expect("parses");
    assert_eq!(job.job_id, "4242");
    assert_eq!((job.user.as_deref(), job.uid), (Some("alice"), Some(1000)));
    assert_eq!(job.account.as_deref(), Some("vision"));
    assert_eq!(job.partition.as_deref(), Some("gpu"));
    assert_eq!(job.state, "RUNNING");
    assert!(job.running());
    assert_eq!(job.node_list, "node07");
    assert_eq!(job.gpus_on("node07"), [0, 1]);
    assert_eq!(job.gpus_on("node08"), Vec::<u32>::new());
}

#[test]
fn a_multi_node_job_with_index_lists_and_types() {
    let groups = "JOB_GRES=gpu:a100:7 Nodes=node[01-02] CPU_IDs=0-31 Mem=131072 GRES=gpu:a100:3(IDX:0-1,3) \
                  Nodes=node05 CPU_IDs=0-7 Mem=32768 GRES=gpu:a100:1(IDX:6),nic:1(IDX:0) ";
    let out = record("77", "big", "nlp", "RUNNING", "node[01-02,05]", groups, "none");
    let job = parse_job(&out, "77").expect("parses");
    assert_eq!(job.node_groups.len(), 2);
    assert_eq!(job.gpus_on("node01"), [0, 1, 3]);
    assert_eq!(job.gpus_on("node02"), [0, 1, 3]);
    assert_eq!(job.gpus_on("node05"), [6]);
    assert_eq!(job.gpus_on("node03"), Vec::<u32>::new());
}

#[test]
fn a_job_without_gres_and_a_pending_one() {
    let cpu_only = record(
        "9",
        "cpu",
        "ops",
        "RUNNING",
        "node07",
        "JOB_GRES=(null) Nodes=node07 CPU_IDs=0-3 Mem=4096 GRES= ",
        "none",
    );
    let job = parse_job(&cpu_only, "9").expect("parses");
    assert_eq!(job.node_groups.len(), 1);
    assert_eq!(job.gpus_on("node07"), Vec::<u32>::new());
    let pending = record("10", "wait", "ops", "PENDING", "(null)", "", "none");
    let job = parse_job(&pending, "10").expect("parses");
    assert!(!job.running());
    assert!(job.node_groups.is_empty());
}

#[test]
fn older_and_odd_gres_forms() {
    assert_eq!(gpu_indexes("gpu(IDX:0,2)"), [0, 2]);
    assert_eq!(gpu_indexes("gpu:tesla:2(IDX:4-5)"), [4, 5]);
    assert_eq!(gpu_indexes("gpu(CNT:2)"), Vec::<u32>::new());
    assert_eq!(gpu_indexes("gpu:0(IDX:N/A)"), Vec::<u32>::new());
    assert_eq!(gpu_indexes("mps:100(0/100,0/100)"), Vec::<u32>::new());
    assert_eq!(gpu_indexes("gpu:1(IDX:9999999999)"), Vec::<u32>::new());
    // Before 19.05: GRES_IDX=.
    let groups = "Nodes=node07 CPU_IDs=0-3 Mem=4096 GRES_IDX=gpu(IDX:1) ";
    let job = parse_job(&record("5", "old", "ops", "RUNNING", "node07", groups, "x"), "5").expect("parses");
    assert_eq!(job.gpus_on("node07"), [1]);
}

#[test]
fn an_array_record_is_picked_by_its_own_job_id() {
    let out = format!(
        "{}{}",
        record("100", "arr", "vision", "RUNNING", "node07", "", "none").replacen(
            "JobId=100 ",
            "JobId=100 ArrayJobId=100 ArrayTaskId=1 ",
            1
        ),
        record("101", "arr", "nlp", "RUNNING", "node07", "", "none").replacen(
            "JobId=101 ",
            "JobId=101 ArrayJobId=100 ArrayTaskId=2 ",
            1
        ),
    );
    assert_eq!(parse_job(&out, "101").expect("parses").account.as_deref(), Some("nlp"));
    assert_eq!(parse_job(&out, "100").expect("parses").account.as_deref(), Some("vision"));
    assert_eq!(parse_job(&out, "102"), Err(ParseError::NoRecord { job_id: "102".into() }));
}

#[test]
fn a_job_name_or_comment_imitating_fields_is_refused() {
    let forged_name = record("7", "x Account=finance", "vision", "RUNNING", "node07", "", "none");
    assert_eq!(
        parse_job(&forged_name, "7"),
        Err(ParseError::Ambiguous { job_id: "7".into(), field: "Account" })
    );
    let forged_comment = record("7", "x", "vision", "RUNNING", "node07", "", "a Partition=prod");
    assert!(matches!(parse_job(&forged_comment, "7"), Err(ParseError::Ambiguous { field: "Partition", .. })));
    // Node groups in a comment (after MinCPUsNode=) are not read.
    let groups_in_comment =
        record("7", "x", "vision", "RUNNING", "node07", "", "Nodes=node07 GRES=gpu:1(IDX:5)");
    assert_eq!(parse_job(&groups_in_comment, "7").expect("parses").gpus_on("node07"), Vec::<u32>::new());
    // A user in the name: UserId= twice. (`JobName=UserId=…` is one field.)
    let user = record("7", "x UserId=root(0)", "vision", "RUNNING", "node07", "", "none");
    assert!(matches!(parse_job(&user, "7"), Err(ParseError::Ambiguous { field: "UserId", .. })));
}

#[test]
fn accounting_off_and_unnamed_users() {
    let out =
        record("8", "n", "(null)", "RUNNING", "node07", "", "none").replace("alice(1000)", "4321(4321)");
    let job = parse_job(&out, "8").expect("parses");
    assert_eq!((job.account, job.user, job.uid), (None, None, Some(4321)));
    assert!(matches!(
        parse_job("JobId=8 JobName=x UserId=a(1)", "8"),
        Err(ParseError::Missing { field: "Account", .. })
    ));
}

#[test]
fn an_ended_job_and_squeue_ids() {
    assert!(is_unknown_job("slurm_load_jobs error: Invalid job id specified\n"));
    assert!(!is_unknown_job("slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"));
    assert_eq!(parse_job_ids("4242\n77\n\n  101 \nJOBID\n"), ["4242", "77", "101"]);
}
