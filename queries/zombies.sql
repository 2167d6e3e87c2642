-- zombies: processes holding GPU memory on a GPU that sits idle.
--
-- Answers: which processes held at least $4 bytes of GPU memory while their
-- GPU's minutes were idle (seconds-weighted mean gpu_util_pct below $3)
-- for at least $5 minutes in a row, between $1 and $2. A minute in which
-- the GPU or the process was not recorded breaks the stretch. Reads the
-- minute tables (gpu_minutes, proc_minutes).
--
-- Parameters:
--   $1  period start (Timestamp, UTC, inclusive)
--   $2  period end (Timestamp, UTC, exclusive)
--   $3  idle threshold (%), idle.threshold_pct of the config
--   $4  least memory held (bytes), zombie.min_mem_mib × 2^20
--   $5  shortest stretch (minutes), zombie.min_idle
--
-- Output, one row per stretch, most memory-minutes first:
--   host, gpu_index, gpu_uuid, pid, proc_start (UTC), comm, user, uid,
--   k8s_namespace, slurm_account  who the process is (the team is added by apron)
--   used_mem_bytes  most memory it held during the stretch (bytes)
--   idle_since      first minute of the stretch (UTC)
--   idle_minutes    length of the stretch (minutes)
--   still_running   whether the process is in its GPU's newest recorded minute
WITH gpu_min AS (
  -- One row per GPU-minute (a minute split across two files has two rollup rows).
  SELECT
    max(host) AS host,
    max(gpu_index) AS gpu_index,
    gpu_uuid,
    minute,
    sum(gpu_util_pct_mean * seconds)
      / sum(CASE WHEN gpu_util_pct_mean IS NOT NULL THEN seconds END) AS util
  FROM gpu_minutes
  WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  GROUP BY gpu_uuid, minute
),
newest AS (
  SELECT gpu_uuid, max(minute) AS newest_minute FROM gpu_min GROUP BY gpu_uuid
),
proc_min AS (
  SELECT
    gpu_uuid, pid, proc_start, minute,
    max(used_mem_bytes_max) AS used_mem_bytes,
    max(comm) AS comm,
    max("user") AS "user",
    max(uid) AS uid,
    max(k8s_namespace) AS k8s_namespace,
    max(slurm_account) AS slurm_account
  FROM proc_minutes
  WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  GROUP BY gpu_uuid, pid, proc_start, minute
),
held_idle AS (
  -- Consecutive qualifying minutes of one process share a group.
  SELECT
    g.host, g.gpu_index, p.*,
    CAST(to_unixtime(p.minute) AS BIGINT) / 60
      - row_number() OVER (PARTITION BY p.gpu_uuid, p.pid, p.proc_start ORDER BY p.minute) AS grp
  FROM proc_min p
  JOIN gpu_min g ON g.gpu_uuid = p.gpu_uuid AND g.minute = p.minute
  WHERE g.util < $3 AND p.used_mem_bytes >= $4
),
last_seen AS (
  SELECT gpu_uuid, pid, proc_start, max(minute) AS last_minute
  FROM proc_min
  GROUP BY gpu_uuid, pid, proc_start
)
SELECT
  h.host,
  h.gpu_index,
  h.gpu_uuid,
  h.pid,
  h.proc_start,
  last_value(h.comm ORDER BY h.minute) AS comm,
  last_value(h."user" ORDER BY h.minute) AS "user",
  last_value(h.uid ORDER BY h.minute) AS uid,
  last_value(h.k8s_namespace ORDER BY h.minute) AS k8s_namespace,
  last_value(h.slurm_account ORDER BY h.minute) AS slurm_account,
  max(h.used_mem_bytes) AS used_mem_bytes,
  min(h.minute) AS idle_since,
  count(*) AS idle_minutes,
  max(l.last_minute) = max(n.newest_minute) AS still_running
FROM held_idle h
JOIN newest n ON n.gpu_uuid = h.gpu_uuid
JOIN last_seen l ON l.gpu_uuid = h.gpu_uuid AND l.pid = h.pid
  AND l.proc_start IS NOT DISTINCT FROM h.proc_start
GROUP BY h.host, h.gpu_index, h.gpu_uuid, h.pid, h.proc_start, h.grp
HAVING count(*) >= $5
ORDER BY max(h.used_mem_bytes) * count(*) DESC, h.host, h.gpu_index, h.pid, idle_since
