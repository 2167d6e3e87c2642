-- proc_minutes_from_raw: the proc_minutes rollup computed from raw samples.
--
-- Answers: what the recorder's minute rollup would hold for the raw process
-- rows at hand. apron runs it over the (date, host) partitions that have no
-- gpu_minutes files, beside gpu_minutes_from_raw.sql. Means are
-- interval-weighted over non-null values; each identity column is the
-- minute's last non-null value.
--
-- Parameters: none (apron narrows proc_samples to the partitions without
-- rollups before running it).
--
-- Output: the columns of proc_minutes (minute, gpu_uuid, pid, proc_start,
-- seconds, samples, used_mem_bytes_mean (bytes), used_mem_bytes_max
-- (bytes), sm_util_pct_mean, mem_util_pct_mean, comm, uid, user,
-- container_id, k8s_pod_uid, k8s_namespace, k8s_pod_name, k8s_container,
-- k8s_labels, slurm_job_id, slurm_account, slurm_partition, claimed_k8s_namespace,
-- claimed_slurm_job_id, claimed_slurm_account),
-- then the partition columns date and host.
SELECT
  date_trunc('minute', ts) AS minute,
  gpu_uuid,
  CAST(pid AS INT) AS pid,
  proc_start,
  CAST(sum(interval_ms) AS DOUBLE) / 1000.0 AS seconds,
  CAST(count(*) AS INT) AS samples,
  sum(CAST(used_mem_bytes AS DOUBLE) * interval_ms)
    / sum(CASE WHEN used_mem_bytes IS NOT NULL THEN interval_ms END) AS used_mem_bytes_mean,
  CAST(max(used_mem_bytes) AS BIGINT) AS used_mem_bytes_max,
  sum(CAST(sm_util_pct AS DOUBLE) * interval_ms)
    / sum(CASE WHEN sm_util_pct IS NOT NULL THEN interval_ms END) AS sm_util_pct_mean,
  sum(CAST(mem_util_pct AS DOUBLE) * interval_ms)
    / sum(CASE WHEN mem_util_pct IS NOT NULL THEN interval_ms END) AS mem_util_pct_mean,
  last_value(comm ORDER BY ts) FILTER (WHERE comm IS NOT NULL) AS comm,
  CAST(last_value(uid ORDER BY ts) FILTER (WHERE uid IS NOT NULL) AS BIGINT) AS uid,
  last_value("user" ORDER BY ts) FILTER (WHERE "user" IS NOT NULL) AS "user",
  last_value(container_id ORDER BY ts) FILTER (WHERE container_id IS NOT NULL) AS container_id,
  last_value(k8s_pod_uid ORDER BY ts) FILTER (WHERE k8s_pod_uid IS NOT NULL) AS k8s_pod_uid,
  last_value(k8s_namespace ORDER BY ts) FILTER (WHERE k8s_namespace IS NOT NULL) AS k8s_namespace,
  last_value(k8s_pod_name ORDER BY ts) FILTER (WHERE k8s_pod_name IS NOT NULL) AS k8s_pod_name,
  last_value(k8s_container ORDER BY ts) FILTER (WHERE k8s_container IS NOT NULL) AS k8s_container,
  last_value(k8s_labels ORDER BY ts) FILTER (WHERE k8s_labels IS NOT NULL) AS k8s_labels,
  last_value(slurm_job_id ORDER BY ts) FILTER (WHERE slurm_job_id IS NOT NULL) AS slurm_job_id,
  last_value(slurm_account ORDER BY ts) FILTER (WHERE slurm_account IS NOT NULL) AS slurm_account,
  last_value(slurm_partition ORDER BY ts) FILTER (WHERE slurm_partition IS NOT NULL) AS slurm_partition,
  last_value(claimed_k8s_namespace ORDER BY ts) FILTER (WHERE claimed_k8s_namespace IS NOT NULL)
    AS claimed_k8s_namespace,
  last_value(claimed_slurm_job_id ORDER BY ts) FILTER (WHERE claimed_slurm_job_id IS NOT NULL)
    AS claimed_slurm_job_id,
  last_value(claimed_slurm_account ORDER BY ts) FILTER (WHERE claimed_slurm_account IS NOT NULL)
    AS claimed_slurm_account,
  date,
  host
FROM proc_samples
GROUP BY date_trunc('minute', ts), gpu_uuid, pid, proc_start, date, host
