-- alerts: the default alert rules, per GPU, at one moment.
--
-- Answers (the rules of docs/src/definitions.md): which GPUs were barely
-- used over the last hour or the last four hours, and which ran hot over
-- the last 15 minutes, by their activity as
-- gpu_minute_states defines it, here per raw sample: gpu_util_pct where
-- known, else sm_active_pct (GPM; MIG instances report only that). A rule
-- judges a GPU only when at least 90% of its window was recorded with its
-- activity known: unrecorded time, and time whose activity is unknown, is
-- never read as idle (or as busy). And which hosts and GPUs seen in the
-- last 7 days have stopped sending samples (no_data): a recorder that died,
-- a host that went down, a GPU that fell off the bus. A host none of whose
-- GPUs has a sample since $5 gets one row (gpu_index and gpu_uuid null); on
-- a host still recording, each GPU without one gets its own row. Hosts and
-- GPUs last seen more than 7 days ago are taken as retired, not alerted on.
--
-- Parameters:
--   $1  now (Timestamp, UTC): the windows end here
--   $2  low_usage_1h threshold (%): fires when the 1 h mean is below it
--   $3  low_usage_4h threshold (%): fires when the 4 h mean is below it
--   $4  high_usage_15m threshold (%): fires when the 15 min mean is above it
--   $5  no_data cut-off (Timestamp, UTC): now minus the no_data threshold;
--       a host or GPU whose newest sample is older fires no_data
--
-- Output, one row per rule that fires on a GPU (no_data: on a host or GPU):
--   rule       low_usage_1h | low_usage_4h | high_usage_15m | no_data
--   host       host name
--   gpu_index  NVML index (no_data on a whole host: null)
--   gpu_uuid   GPU UUID (no_data on a whole host: null)
--   value      interval-weighted mean activity over the window (%);
--              no_data: minutes since the newest sample (min)
--   since      first sample of the window (UTC): the rule has held since then;
--              no_data: the newest sample (UTC), the data stopped after it
WITH activity AS (
  SELECT
    host, gpu_index, gpu_uuid, ts,
    coalesce(CAST(gpu_util_pct AS DOUBLE), CAST(sm_active_pct AS DOUBLE)) AS act,
    CASE WHEN gpu_util_pct IS NOT NULL OR sm_active_pct IS NOT NULL THEN interval_ms END AS known_ms
  FROM gpu_samples
  WHERE ts >= $1 - INTERVAL '4 hours'
    AND ts < $1
    AND date >= CAST($1 - INTERVAL '4 hours' AS DATE)
),
per_gpu AS (
  SELECT
    host,
    gpu_index,
    gpu_uuid,
    sum(CASE WHEN ts >= $1 - INTERVAL '1 hour' THEN act * known_ms END)
      / sum(CASE WHEN ts >= $1 - INTERVAL '1 hour' THEN known_ms END) AS mean_1h,
    sum(CASE WHEN ts >= $1 - INTERVAL '1 hour' THEN known_ms END) AS recorded_ms_1h,
    min(CASE WHEN ts >= $1 - INTERVAL '1 hour' THEN ts END) AS since_1h,
    sum(act * known_ms) / sum(known_ms) AS mean_4h,
    sum(known_ms) AS recorded_ms_4h,
    min(ts) AS since_4h,
    sum(CASE WHEN ts >= $1 - INTERVAL '15 minutes' THEN act * known_ms END)
      / sum(CASE WHEN ts >= $1 - INTERVAL '15 minutes' THEN known_ms END) AS mean_15m,
    sum(CASE WHEN ts >= $1 - INTERVAL '15 minutes' THEN known_ms END) AS recorded_ms_15m,
    min(CASE WHEN ts >= $1 - INTERVAL '15 minutes' THEN ts END) AS since_15m
  FROM activity
  GROUP BY host, gpu_index, gpu_uuid
),
-- Each GPU's newest minute of the last 7 days, from the minute tables
-- (small, and they hold the minutes of the rows still in the WAL).
seen AS (
  SELECT host, gpu_index, gpu_uuid, max(minute) AS last_minute
  FROM gpu_minutes
  WHERE minute >= $1 - INTERVAL '7 days'
    AND minute < $1
    AND date >= CAST($1 - INTERVAL '7 days' AS DATE)
  GROUP BY host, gpu_index, gpu_uuid
),
-- A GPU whose newest minute starts at or after the cut-off is fresh; for
-- the others the newest raw sample in that minute decides, so raw rows
-- are read only for GPUs that may have stopped.
last_sample AS (
  SELECT s.host, s.gpu_index, s.gpu_uuid, max(s.ts) AS last_ts
  FROM gpu_samples s
  JOIN (SELECT * FROM seen WHERE last_minute < $5) c
    ON s.host = c.host AND s.gpu_uuid = c.gpu_uuid
   AND s.ts >= c.last_minute AND s.ts < c.last_minute + INTERVAL '1 minute'
  WHERE s.ts >= $1 - INTERVAL '7 days'
    AND s.ts < $1
    AND s.date >= CAST($1 - INTERVAL '7 days' AS DATE)
  GROUP BY s.host, s.gpu_index, s.gpu_uuid
),
stale AS (
  SELECT host, gpu_index, gpu_uuid, last_ts FROM last_sample WHERE last_ts < $5
),
gpus_seen AS (
  SELECT host, count(*) AS gpus FROM seen GROUP BY host
),
-- Hosts none of whose GPUs seen in the 7 days is fresh.
dead_hosts AS (
  SELECT st.host, max(st.last_ts) AS last_ts
  FROM stale st JOIN gpus_seen g ON st.host = g.host
  GROUP BY st.host, g.gpus
  HAVING count(*) = g.gpus
)
SELECT 'low_usage_1h' AS rule, host, gpu_index, gpu_uuid, mean_1h AS value, since_1h AS since
FROM per_gpu WHERE recorded_ms_1h >= 0.9 * 3600000 AND mean_1h < $2
UNION ALL
SELECT 'low_usage_4h' AS rule, host, gpu_index, gpu_uuid, mean_4h AS value, since_4h AS since
FROM per_gpu WHERE recorded_ms_4h >= 0.9 * 14400000 AND mean_4h < $3
UNION ALL
SELECT 'high_usage_15m' AS rule, host, gpu_index, gpu_uuid, mean_15m AS value, since_15m AS since
FROM per_gpu WHERE recorded_ms_15m >= 0.9 * 900000 AND mean_15m > $4
UNION ALL
SELECT 'no_data' AS rule, host, CAST(NULL AS INT) AS gpu_index, CAST(NULL AS VARCHAR) AS gpu_uuid,
  (CAST($1 AS BIGINT) - CAST(last_ts AS BIGINT)) / 60000.0 AS value, last_ts AS since
FROM dead_hosts
UNION ALL
SELECT 'no_data' AS rule, host, gpu_index, gpu_uuid,
  (CAST($1 AS BIGINT) - CAST(last_ts AS BIGINT)) / 60000.0 AS value, last_ts AS since
FROM stale WHERE host NOT IN (SELECT host FROM dead_hosts)
ORDER BY rule, host, gpu_index
