-- minute_costs: every GPU-minute of a period, priced, classified and
-- attributed to the processes on it: the one definition of cost behind
-- spend, idle-cost, windows and the charts.
--
-- Answers, per DESIGN.md's definitions: a GPU-minute (one GPU over one UTC
-- minute; its seconds are the recorded seconds) is busy when its
-- seconds-weighted mean gpu_util_pct is at or above the idle threshold,
-- else idle-held when some process held memory on the GPU in it, else
-- idle-empty. A minute whose utilization NVML could not give counts as
-- busy: apron never reports idleness it did not measure. Its cost is
--   seconds × apron_gpu_rate(gpu_model) + energy_kWh × price_per_kwh × pue
-- and it is split among the minute's processes by their share of
-- memory-time (used_mem_bytes × seconds; equal shares when none held
-- measurable memory). Each process's team comes from the config's rules
-- (apron_team); a minute with no process, and every idle-empty minute,
-- belongs to "(unallocated)". Unrecorded time has no row at all.
--
-- Functions apron registers from apron.toml:
--   apron_gpu_rate(gpu_model)  purchase_price / lifetime + ops_per_gpu_hour, per second (currency/s)
--   apron_team(user, uid, k8s_namespace, slurm_account)  the team of a process
--
-- Parameters:
--   $1  period start (Timestamp, UTC, inclusive)
--   $2  period end (Timestamp, UTC, exclusive)
--   $3  idle threshold (%), idle.threshold_pct
--   $4  energy price (currency per kWh), energy.price_per_kwh
--   $5  power usage effectiveness, energy.pue
--
-- Output, one row per GPU-minute and owner (a process, or "(unallocated)"):
--   host, gpu_index, gpu_uuid, gpu_model  the GPU
--   minute     start of the UTC minute
--   state      busy | idle_held | idle_empty
--   util_pct   the GPU's mean gpu_util_pct in the minute (null: unknown)
--   team       the owner's team, "unassigned", or "(unallocated)"
--   user       the owner's user name ("(unallocated)"; "uid N" or "(unknown)" when the name is not known)
--   pid        the owner's pid (null for "(unallocated)")
--   share      the owner's share of the minute, 0–1
--   seconds    recorded seconds × share (s)
--   energy_j   energy × share (J; 0 when not known)
--   cost       cost × share (currency)
WITH gpu AS (
  SELECT
    gpu_uuid,
    minute,
    max(host) AS host,
    max(gpu_index) AS gpu_index,
    max(gpu_model) AS gpu_model,
    sum(seconds) AS seconds,
    sum(gpu_util_pct_mean * seconds)
      / sum(CASE WHEN gpu_util_pct_mean IS NOT NULL THEN seconds END) AS util_pct,
    coalesce(sum(energy_j), 0) AS energy_j,
    bool_or(proc_held) AS held
  FROM gpu_minutes
  WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  GROUP BY gpu_uuid, minute
),
priced AS (
  SELECT
    *,
    CASE
      WHEN util_pct IS NULL OR util_pct >= $3 THEN 'busy'
      WHEN held THEN 'idle_held'
      ELSE 'idle_empty'
    END AS state,
    seconds * apron_gpu_rate(gpu_model) + energy_j / 3600000.0 * $4 * $5 AS cost
  FROM gpu
),
procs AS (
  SELECT
    gpu_uuid,
    minute,
    pid,
    proc_start,
    coalesce(sum(used_mem_bytes_mean * seconds), 0) AS mem_time,
    apron_team(max("user"), max(uid), max(k8s_namespace), max(slurm_account)) AS team,
    coalesce(max("user"), 'uid ' || CAST(max(uid) AS VARCHAR), '(unknown)') AS "user"
  FROM proc_minutes
  WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  GROUP BY gpu_uuid, minute, pid, proc_start
),
totals AS (
  SELECT gpu_uuid, minute, sum(mem_time) AS mem_time, count(*) AS procs
  FROM procs
  GROUP BY gpu_uuid, minute
),
owners AS (
  SELECT
    p.gpu_uuid,
    p.minute,
    p.pid,
    p.team,
    p."user",
    CASE WHEN t.mem_time > 0 THEN p.mem_time / t.mem_time ELSE 1.0 / t.procs END AS share
  FROM procs p
  JOIN totals t ON t.gpu_uuid = p.gpu_uuid AND t.minute = p.minute
)
SELECT
  c.host,
  c.gpu_index,
  c.gpu_uuid,
  c.gpu_model,
  c.minute,
  c.state,
  c.util_pct,
  coalesce(o.team, '(unallocated)') AS team,
  coalesce(o."user", '(unallocated)') AS "user",
  o.pid,
  coalesce(o.share, 1.0) AS share,
  c.seconds * coalesce(o.share, 1.0) AS seconds,
  c.energy_j * coalesce(o.share, 1.0) AS energy_j,
  c.cost * coalesce(o.share, 1.0) AS cost
FROM priced c
LEFT JOIN owners o
  ON o.gpu_uuid = c.gpu_uuid AND o.minute = c.minute AND c.state <> 'idle_empty'
