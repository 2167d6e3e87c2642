-- reclaim: GPUs idle for a long stretch without a break, to hand back.
--
-- Answers: which GPUs were idle (interval-weighted mean gpu_util_pct of the
-- minute below the idle threshold) for at least $4 minutes in a row between
-- $1 and $2, since when, and who held memory on them meanwhile. A minute
-- with no samples breaks a stretch: unrecorded time is never taken for idle.
-- Reads the minute tables (gpu_minutes, proc_minutes).
--
-- Parameters:
--   $1  period start (Timestamp, UTC, inclusive)
--   $2  period end (Timestamp, UTC, exclusive)
--   $3  idle threshold (%), idle.threshold_pct of the config
--   $4  minimum stretch (minutes), --for
--
-- Output, one row per idle stretch, longest first:
--   host          host name
--   gpu_index     NVML index
--   gpu_uuid      GPU UUID
--   idle_since    first minute of the stretch (UTC)
--   idle_minutes  length of the stretch (minutes)
--   held_by       users whose processes held GPU memory during it, comma-separated; empty if none
--   still_idle    whether the stretch runs up to the GPU's newest recorded minute
WITH minutes AS (
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
  SELECT gpu_uuid, max(minute) AS newest_minute FROM minutes GROUP BY gpu_uuid
),
idle AS (
  -- Consecutive idle minutes share a group: minute number minus rank.
  SELECT
    host, gpu_index, gpu_uuid, minute,
    CAST(to_unixtime(minute) AS BIGINT) / 60
      - row_number() OVER (PARTITION BY gpu_uuid ORDER BY minute) AS grp
  FROM minutes
  WHERE util < $3
),
holders AS (
  SELECT gpu_uuid, minute, "user"
  FROM proc_minutes
  WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
    AND used_mem_bytes_max > 0 AND "user" IS NOT NULL
  GROUP BY gpu_uuid, minute, "user"
),
stretches AS (
  SELECT host, gpu_index, gpu_uuid, grp, min(minute) AS idle_since, max(minute) AS last_minute,
         count(*) AS idle_minutes
  FROM idle
  GROUP BY host, gpu_index, gpu_uuid, grp
  HAVING count(*) >= $4
)
SELECT
  s.host,
  s.gpu_index,
  s.gpu_uuid,
  s.idle_since,
  s.idle_minutes,
  coalesce(array_to_string(array_sort(array_distinct(array_agg(h."user"))), ','), '') AS held_by,
  s.last_minute = n.newest_minute AS still_idle
FROM stretches s
JOIN newest n ON n.gpu_uuid = s.gpu_uuid
LEFT JOIN holders h ON h.gpu_uuid = s.gpu_uuid AND h.minute >= s.idle_since AND h.minute <= s.last_minute
GROUP BY s.host, s.gpu_index, s.gpu_uuid, s.idle_since, s.idle_minutes, s.last_minute, n.newest_minute
ORDER BY s.idle_minutes DESC, s.host, s.gpu_index, s.idle_since
