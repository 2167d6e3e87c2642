-- gpu_days: every physical GPU's busy share, day by day (the gpu-days chart).
--
-- Answers: for each physical GPU and UTC day of the period, the share of
-- its GPU time that was busy (gpu_minute_states' state: activity at or
-- above the idle threshold) among its time of known state, and how much of
-- the day was recorded. A MIG instance is part of its parent: a
-- partitioned GPU's row sums its instances' GPU-seconds and its own unheld
-- slices', each counted by its capacity share, so a 3g.40gb instance busy
-- all day on an otherwise idle 7-slice GPU makes it 3/7 = 42.9% busy. One
-- measure for every GPU, whether its activity came from utilization or
-- from SM activity (a MIG instance has only that): busy or not, by the
-- same threshold.
--
-- Reads cost_buckets: minute_costs (queries/minute_costs.sql) summed per
-- bucket of the chart's length (at most an hour), GPU, state and owner,
-- which apron computes for the period and the config (analyze/src/ledger/mod.rs);
-- any sum over minute_costs at a bucket or coarser reads the same there.
-- Under `apron sql`, cost_buckets is per minute.
--
-- Parameters: none (the period is cost_buckets').
--
-- Output, one row per physical GPU and day with data, by host, gpu_index, day:
--   host, gpu_index, gpu_uuid  the physical GPU (a MIG instance's parent)
--   day             the UTC day
--   busy_share_pct  busy GPU-seconds ÷ GPU-seconds busy or idle (%; null
--                   when no minute's activity is known)
--   recorded_hours  GPU-hours of the day recorded (h; a MIG GPU's by its
--                   instances' and its unheld slices' shares)
SELECT
  host,
  gpu_index,
  coalesce(parent_gpu_uuid, gpu_uuid) AS gpu_uuid,
  CAST(minute AS DATE) AS day,
  100.0 * coalesce(sum(seconds) FILTER (WHERE state = 'busy'), 0)
    / sum(seconds) FILTER (WHERE state <> 'unknown') AS busy_share_pct,
  sum(seconds) / 3600.0 AS recorded_hours
FROM cost_buckets
GROUP BY host, gpu_index, coalesce(parent_gpu_uuid, gpu_uuid), CAST(minute AS DATE)
ORDER BY host, gpu_index, gpu_uuid, day
