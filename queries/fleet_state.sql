-- fleet_state: how many GPUs were busy, idle-held, idle-empty and of
-- unknown state over time (the fleet-state chart).
--
-- Answers: for each bucket of $1 seconds, the mean number of GPUs in each
-- state: the GPU-seconds recorded in that state divided by the bucket's
-- length. Unrecorded time is in none of the states.
--
-- Reads cost_buckets: minute_costs (queries/minute_costs.sql) summed per
-- bucket of the chart's length (at most an hour), GPU, state and owner,
-- which apron computes for the period and the config (analyze/src/ledger/mod.rs);
-- any sum over minute_costs at a bucket or coarser reads the same there.
-- Under `apron sql`, cost_buckets is per minute.
--
-- Parameters:
--   $1  bucket length (seconds, a whole number of minutes)
--
-- Output, one row per bucket with data, oldest first:
--   bucket      bucket start (UTC)
--   busy        mean number of busy GPUs (GPUs)
--   idle_held   mean number of idle GPUs holding memory (GPUs)
--   idle_empty  mean number of idle, empty GPUs (GPUs)
--   unknown     mean number of GPUs with no activity known (GPUs)
SELECT
  arrow_cast(to_timestamp_millis(CAST(minute AS BIGINT) / ($1 * 1000) * ($1 * 1000)), 'Timestamp(ms, "UTC")') AS bucket,
  coalesce(sum(seconds) FILTER (WHERE state = 'busy'), 0) / $1 AS busy,
  coalesce(sum(seconds) FILTER (WHERE state = 'idle_held'), 0) / $1 AS idle_held,
  coalesce(sum(seconds) FILTER (WHERE state = 'idle_empty'), 0) / $1 AS idle_empty,
  coalesce(sum(seconds) FILTER (WHERE state = 'unknown'), 0) / $1 AS unknown
FROM cost_buckets
GROUP BY 1
ORDER BY 1
