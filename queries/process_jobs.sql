-- process_jobs: the Kubernetes pod and the Slurm job of each process seen
-- in a span, for the commands that stop a zombie (`apron zombies
-- --commands`): a process in a pod is stopped by deleting its pod, one in
-- a Slurm job by cancelling its job.
--
-- Answers: for every process (GPU, pid, start time) with a pod uid or a
-- Slurm job id in proc_minutes between $1 and $2, its pod uid and its job
-- id (each the largest value recorded, though a process has one of each at
-- most), both from its cgroup: what the process claims in its environment
-- (claimed_*) is never used. Processes with neither have no row.
--
-- Parameters:
--   $1  span start (Timestamp, UTC, inclusive)
--   $2  span end (Timestamp, UTC, exclusive)
--
-- Output, one row per process:
--   gpu_uuid, pid, proc_start (UTC)  the process
--   k8s_pod_uid     its Kubernetes pod's uid (null: not in a pod, or not recorded)
--   slurm_job_id    its Slurm job (null: not in a job, or not recorded)
SELECT
  gpu_uuid,
  pid,
  proc_start,
  max(k8s_pod_uid) AS k8s_pod_uid,
  max(slurm_job_id) AS slurm_job_id
FROM proc_minutes
WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  AND (k8s_pod_uid IS NOT NULL OR slurm_job_id IS NOT NULL)
GROUP BY gpu_uuid, pid, proc_start
