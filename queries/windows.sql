-- windows: the fleet's week, hour by hour: how busy it is and what its idle
-- time costs, to find the recurring idle windows (nights, weekends).
--
-- Answers: for each hour of the week (UTC), the seconds-weighted mean
-- activity of the recorded GPU-minutes in it (gpu_util_pct, else
-- sm_active_pct), the share of recorded GPU time that was idle (time with
-- no activity known is recorded but never idle), and the idle GPU-hours
-- and idle cost of a typical week (totals divided by the number of weeks
-- that hour was recorded).
-- apron reads the profile to state the recurring idle windows in words.
--
-- Reads cost_buckets: minute_costs (queries/minute_costs.sql) summed per
-- bucket of the chart's length (at most an hour), GPU, state and owner,
-- which apron computes for the period and the config (analyze/src/ledger/mod.rs);
-- any sum over minute_costs at a bucket or coarser reads the same there.
-- Under `apron sql`, cost_buckets is per minute.
--
-- Parameters: none (the period and the prices are cost_buckets').
--
-- Output, one row per recorded hour of the week, Monday 00:00 first:
--   dow                       day of the week, Mon … Sun
--   hour                      hour of the day, 0–23 (UTC)
--   mean_util_pct             mean activity, activity_pct of cost_buckets (%; null: unknown)
--   idle_share_pct            idle share of the recorded GPU time (%)
--   idle_gpu_hours_per_week   idle GPU-hours in this hour of a typical week (h)
--   idle_cost_per_week        their cost (currency)
--   gpus                      GPUs recorded in this hour, on average
--   weeks                     how many times this hour of the week was recorded
WITH cells AS (
  SELECT
    (CAST(date_part('dow', minute) AS INT) + 6) % 7 AS day,
    CAST(date_part('hour', minute) AS INT) AS hour,
    count(DISTINCT date_trunc('hour', minute)) AS weeks,
    sum(activity_pct * seconds) / sum(CASE WHEN activity_pct IS NOT NULL THEN seconds END) AS mean_util_pct,
    sum(seconds) AS seconds,
    coalesce(sum(seconds) FILTER (WHERE state IN ('idle_held', 'idle_empty')), 0) AS idle_seconds,
    coalesce(sum(cost) FILTER (WHERE state IN ('idle_held', 'idle_empty')), 0) AS idle_cost
  FROM cost_buckets
  GROUP BY 1, 2
)
SELECT
  CASE day WHEN 0 THEN 'Mon' WHEN 1 THEN 'Tue' WHEN 2 THEN 'Wed' WHEN 3 THEN 'Thu'
           WHEN 4 THEN 'Fri' WHEN 5 THEN 'Sat' ELSE 'Sun' END AS dow,
  hour,
  mean_util_pct,
  100.0 * idle_seconds / seconds AS idle_share_pct,
  idle_seconds / 3600.0 / weeks AS idle_gpu_hours_per_week,
  idle_cost / weeks AS idle_cost_per_week,
  seconds / 3600.0 / weeks AS gpus,
  weeks
FROM cells
ORDER BY day, hour
