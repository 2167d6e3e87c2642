-- power: the fleet's power draw over time and the energy used since the
-- period began (the power chart).
--
-- Answers: for each bucket of $1 seconds, the fleet's mean power (energy
-- drawn in the bucket over the bucket's length) and the energy drawn from
-- the period's start to the bucket's end. Energy is the GPUs' own, before
-- PUE; unrecorded time draws nothing, and so does recorded time with
-- neither an energy counter nor a power reading (gpu_minute_states'
-- energy_unknown_seconds; the header of the report says for how long).
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
--   power_kw    mean fleet power over the bucket (kW)
--   energy_kwh  energy since the period's start, up to the bucket's end (kWh)
WITH buckets AS (
  SELECT
    arrow_cast(to_timestamp_millis(CAST(minute AS BIGINT) / ($1 * 1000) * ($1 * 1000)), 'Timestamp(ms, "UTC")') AS bucket,
    sum(energy_j) AS energy_j
  FROM cost_buckets
  GROUP BY 1
)
SELECT
  bucket,
  energy_j / $1 / 1000.0 AS power_kw,
  sum(energy_j) OVER (ORDER BY bucket ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) / 3600000.0 AS energy_kwh
FROM buckets
ORDER BY bucket
