-- job_timeline: one GPU's minutes over a job's time, for `apron job ID
-- --out DIR` (a PNG per GPU the job held; analyze/src/commands/job.rs).
--
-- Answers: minute by minute, how busy the GPU was, how much of its memory
-- was used, and where GPM measured them its SM and tensor activity. A
-- minute split across two files is aggregated as gpu_minutes asks
-- (seconds-weighted means, maxima).
--
-- Parameters:
--   $1  span start (UTC timestamp, inclusive): the job's first minute
--   $2  span end (UTC timestamp, exclusive): the end of its last minute
--   $3  host name: the GPU's host (the only host partition read)
--   $4  the GPU's gpu uuid (a MIG instance's own)
--
-- Output, one row per recorded minute, oldest first:
--   minute
--   util_pct            mean gpu_util_pct (%; null: not measured, as on a MIG instance)
--   sm_active_pct       mean SM activity, GPM (%; null: not measured)
--   tensor_active_pct   mean tensor pipe activity, GPM (%; null: not measured)
--   mem_pct             the most memory used on the GPU, by every process, of its memory (%; null: unknown)
SELECT
  minute,
  sum(gpu_util_pct_mean * seconds)
    / sum(CASE WHEN gpu_util_pct_mean IS NOT NULL THEN seconds END) AS util_pct,
  sum(sm_active_pct_mean * seconds)
    / sum(CASE WHEN sm_active_pct_mean IS NOT NULL THEN seconds END) AS sm_active_pct,
  sum(tensor_active_pct_mean * seconds)
    / sum(CASE WHEN tensor_active_pct_mean IS NOT NULL THEN seconds END) AS tensor_active_pct,
  100.0 * CAST(max(fb_used_bytes_max) AS DOUBLE) / CAST(nullif(max(fb_total_bytes), 0) AS DOUBLE) AS mem_pct
FROM gpu_minutes
WHERE minute >= $1 AND minute < $2
  AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  AND host = $3 AND gpu_uuid = $4
GROUP BY minute
ORDER BY minute
