-- alerts: the default alert rules of DESIGN.md, per GPU, at one moment.
--
-- Answers: which GPUs were barely used over the last hour or the last four
-- hours, and which ran hot over the last 15 minutes. A rule judges a GPU
-- only when at least 90% of its window was recorded: unrecorded time is
-- never read as idle (or as busy).
--
-- Parameters:
--   $1  now (Timestamp, UTC): the windows end here
--   $2  low_usage_1h threshold (%): fires when the 1 h mean is below it
--   $3  low_usage_4h threshold (%): fires when the 4 h mean is below it
--   $4  high_usage_15m threshold (%): fires when the 15 min mean is above it
--
-- Output, one row per rule that fires on a GPU:
--   rule       low_usage_1h | low_usage_4h | high_usage_15m
--   host       host name
--   gpu_index  NVML index
--   gpu_uuid   GPU UUID
--   value      interval-weighted mean gpu_util_pct over the window (%)
--   since      first sample of the window (UTC): the rule has held since then
WITH per_gpu AS (
  SELECT
    host,
    gpu_index,
    gpu_uuid,
    sum(CASE WHEN ts >= $1 - INTERVAL '1 hour' THEN CAST(gpu_util_pct AS DOUBLE) * interval_ms END)
      / sum(CASE WHEN ts >= $1 - INTERVAL '1 hour' AND gpu_util_pct IS NOT NULL THEN interval_ms END) AS mean_1h,
    sum(CASE WHEN ts >= $1 - INTERVAL '1 hour' THEN interval_ms END) AS recorded_ms_1h,
    min(CASE WHEN ts >= $1 - INTERVAL '1 hour' THEN ts END) AS since_1h,
    sum(CAST(gpu_util_pct AS DOUBLE) * interval_ms)
      / sum(CASE WHEN gpu_util_pct IS NOT NULL THEN interval_ms END) AS mean_4h,
    sum(interval_ms) AS recorded_ms_4h,
    min(ts) AS since_4h,
    sum(CASE WHEN ts >= $1 - INTERVAL '15 minutes' THEN CAST(gpu_util_pct AS DOUBLE) * interval_ms END)
      / sum(CASE WHEN ts >= $1 - INTERVAL '15 minutes' AND gpu_util_pct IS NOT NULL THEN interval_ms END) AS mean_15m,
    sum(CASE WHEN ts >= $1 - INTERVAL '15 minutes' THEN interval_ms END) AS recorded_ms_15m,
    min(CASE WHEN ts >= $1 - INTERVAL '15 minutes' THEN ts END) AS since_15m
  FROM gpu_samples
  WHERE ts >= $1 - INTERVAL '4 hours'
    AND ts < $1
    AND date >= CAST($1 - INTERVAL '4 hours' AS DATE)
  GROUP BY host, gpu_index, gpu_uuid
)
SELECT 'low_usage_1h' AS rule, host, gpu_index, gpu_uuid, mean_1h AS value, since_1h AS since
FROM per_gpu WHERE recorded_ms_1h >= 0.9 * 3600000 AND mean_1h < $2
UNION ALL
SELECT 'low_usage_4h' AS rule, host, gpu_index, gpu_uuid, mean_4h AS value, since_4h AS since
FROM per_gpu WHERE recorded_ms_4h >= 0.9 * 14400000 AND mean_4h < $3
UNION ALL
SELECT 'high_usage_15m' AS rule, host, gpu_index, gpu_uuid, mean_15m AS value, since_15m AS since
FROM per_gpu WHERE recorded_ms_15m >= 0.9 * 900000 AND mean_15m > $4
ORDER BY rule, host, gpu_index
