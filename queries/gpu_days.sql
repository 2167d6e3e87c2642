-- gpu_days: every GPU's mean utilization, day by day (the gpu-days chart).
--
-- Answers: for each GPU and UTC day of the period, the seconds-weighted
-- mean activity of its recorded minutes (gpu_util_pct, else sm_active_pct,
-- as gpu_minute_states defines it) and how much of the day was
-- recorded.
--
-- Reads cost_buckets: minute_costs (queries/minute_costs.sql) summed per
-- bucket of the chart's length (at most an hour), GPU, state and owner,
-- which apron computes for the period and the config (analyze/src/ledger.rs);
-- any sum over minute_costs at a bucket or coarser reads the same there.
-- Under `apron sql`, cost_buckets is per minute.
--
-- Parameters: none (the period is cost_buckets').
--
-- Output, one row per GPU and day with data, by host, gpu_index, day:
--   host, gpu_index, gpu_uuid  the GPU
--   day             the UTC day
--   mean_util_pct   mean activity (%; null when unknown)
--   recorded_hours  hours of the day recorded (h)
SELECT
  host,
  gpu_index,
  gpu_uuid,
  CAST(minute AS DATE) AS day,
  sum(activity_pct * seconds) / sum(CASE WHEN activity_pct IS NOT NULL THEN seconds END) AS mean_util_pct,
  sum(seconds) / 3600.0 AS recorded_hours
FROM cost_buckets
GROUP BY host, gpu_index, gpu_uuid, CAST(minute AS DATE)
ORDER BY host, gpu_index, gpu_uuid, day
