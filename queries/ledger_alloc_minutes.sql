-- ledger_alloc_minutes: the alloc_minutes rows of one day of a period, as the
-- ledger (analyze/src/ledger/mod.rs) reads them (see alloc_minute_states.sql,
-- whose definition the ledger follows and a test holds it to).
--
-- Parameters:
--   $1  slice start (Timestamp, UTC, inclusive)
--   $2  slice end (Timestamp, UTC, exclusive), within the slice's day
--   $3  the slice's day (Date, or a Timestamp at its midnight), the only date partition read
--   $4  first host read (inclusive; '' for all)
--   $5  host after the last read (exclusive; U+10FFFF for all)
--
-- Output, one row per alloc_minutes row (see alloc_minutes in docs/src/durability.md):
--   gpu_uuid, minute                 the GPU-minute (or its part in one file)
--   source                           kubernetes | slurm
--   k8s_namespace, k8s_pod_name, k8s_container  Kubernetes: the pod and container (null otherwise)
--   k8s_labels                                  Kubernetes: the pod's labels recorded (null: none)
--   slurm_job_id, slurm_account, user           Slurm: the job, its account and user (null otherwise)
--   seconds                          seconds the allocation was recorded (s)
--   host                             the GPU's host (the ledger reads a slice host by host)
SELECT
  gpu_uuid, minute, source, k8s_namespace, k8s_pod_name, k8s_container, k8s_labels, slurm_job_id,
  slurm_account, "user", seconds, host
FROM alloc_minutes
WHERE minute >= $1 AND minute < $2 AND date = CAST($3 AS DATE) AND host >= $4 AND host < $5
