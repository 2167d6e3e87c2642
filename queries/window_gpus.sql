-- window_gpus: each GPU's week, hour by hour: the share of its recorded
-- time that was idle, to tell which GPUs of a host a recurring idle window
-- (queries/windows.sql) may hand to a job.
--
-- Answers: for each GPU and each hour of the week (UTC) it was recorded in,
-- the share of its recorded GPU time that was idle (time with no activity
-- known is recorded but never idle), the same rule windows.sql applies to
-- the whole fleet; and what CUDA needs to address the GPU: its host, its
-- NVML index at its latest minute in the period (an index can change when
-- a host's GPUs do), and whether it is a MIG instance or a GPU in MIG mode
-- (the parent of an instance).
-- apron reads it for `apron windows --cron`: a GPU joins a window when
-- every hour of the window is at least --min-idle-share idle.
--
-- Reads cost_buckets: minute_costs (queries/minute_costs.sql) summed per
-- bucket of the chart's length (at most an hour), GPU, state and owner,
-- which apron computes for the period and the config (analyze/src/ledger/mod.rs);
-- any sum over minute_costs at a bucket or coarser reads the same there.
-- Under `apron sql`, cost_buckets is per minute.
--
-- Parameters: none (the period is cost_buckets').
--
-- Output, one row per GPU and recorded hour of the week, in no set order:
-- apron groups the rows by GPU and sorts the GPUs by host, GPU index and
-- UUID itself (the engine's sort of every row here can ask for many times
-- their size at thousands of GPUs; docs/src/performance.md):
--   host             the GPU's host
--   gpu_index        its NVML index at its latest minute in the period
--   gpu_uuid         the GPU, or the MIG instance (MIG-…)
--   parent_gpu_uuid  MIG: an instance's parent GPU (null otherwise)
--   mig_mode         true for a GPU some MIG instance of the period belongs to
--   dow              day of the week, Mon … Sun
--   hour             hour of the day, 0–23 (UTC)
--   idle_share_pct   idle share of the GPU's recorded time in this hour of the week (%; null: none recorded)
--   idle_cost        the cost of its idle time in this hour of the week, summed over the period (currency)
WITH parents AS (
  SELECT DISTINCT parent_gpu_uuid AS gpu_uuid FROM cost_buckets WHERE parent_gpu_uuid IS NOT NULL
),
gpus AS (
  SELECT
    host,
    gpu_uuid,
    last_value(gpu_index ORDER BY minute) AS gpu_index,
    max(parent_gpu_uuid) AS parent_gpu_uuid
  FROM cost_buckets
  GROUP BY host, gpu_uuid
),
cells AS (
  SELECT
    host,
    gpu_uuid,
    (CAST(date_part('dow', minute) AS INT) + 6) % 7 AS day,
    CAST(date_part('hour', minute) AS INT) AS hour,
    sum(seconds) AS seconds,
    coalesce(sum(seconds) FILTER (WHERE state IN ('idle_held', 'idle_empty')), 0) AS idle_seconds,
    coalesce(sum(cost) FILTER (WHERE state IN ('idle_held', 'idle_empty')), 0) AS idle_cost
  FROM cost_buckets
  GROUP BY 1, 2, 3, 4
)
SELECT
  c.host,
  g.gpu_index,
  c.gpu_uuid,
  g.parent_gpu_uuid,
  p.gpu_uuid IS NOT NULL AS mig_mode,
  CASE c.day WHEN 0 THEN 'Mon' WHEN 1 THEN 'Tue' WHEN 2 THEN 'Wed' WHEN 3 THEN 'Thu'
             WHEN 4 THEN 'Fri' WHEN 5 THEN 'Sat' ELSE 'Sun' END AS dow,
  c.hour,
  CASE WHEN c.seconds > 0 THEN 100.0 * c.idle_seconds / c.seconds END AS idle_share_pct,
  c.idle_cost
FROM cells c
JOIN gpus g ON g.host = c.host AND g.gpu_uuid = c.gpu_uuid
LEFT JOIN parents p ON p.gpu_uuid = c.gpu_uuid
