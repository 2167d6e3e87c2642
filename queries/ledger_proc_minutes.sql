-- ledger_proc_minutes: the proc_minutes rows of one day of a period, as the
-- ledger (analyze/src/ledger/mod.rs) reads them (see proc_minute_states.sql,
-- whose definition the ledger follows and a test holds it to).
--
-- Parameters:
--   $1  slice start (Timestamp, UTC, inclusive)
--   $2  slice end (Timestamp, UTC, exclusive), within the slice's day
--   $3  the slice's day (Date, or a Timestamp at its midnight), the only date partition read
--   $4  first host read (inclusive; '' for all)
--   $5  host after the last read (exclusive; U+10FFFF for all)
--
-- Output, one row per proc_minutes row (see proc_minutes in docs/src/durability.md):
--   gpu_uuid, minute, pid, proc_start        the process-minute (or its part in one file)
--   seconds                                  seconds the process was seen (s)
--   used_mem_bytes_mean, used_mem_bytes_max  its GPU memory (bytes; null: unknown)
--   sm_util_pct_mean                         its own SM utilization (%; null: unknown)
--   comm, user, uid, k8s_namespace, k8s_labels, slurm_account  who it is, as the team rules see it
--   host, slurm_job_id, k8s_pod_name, container_id  the job it is part of (apron jobs)
SELECT
  gpu_uuid, minute, pid, proc_start, seconds, used_mem_bytes_mean, used_mem_bytes_max,
  sm_util_pct_mean, comm, "user", uid, k8s_namespace, k8s_labels, slurm_account,
  host, slurm_job_id, k8s_pod_name, container_id
FROM proc_minutes
WHERE minute >= $1 AND minute < $2 AND date = CAST($3 AS DATE) AND host >= $4 AND host < $5
