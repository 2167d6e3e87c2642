-- pick: the least-loaded GPU of one host, for CUDA_VISIBLE_DEVICES.
--
-- Answers: which GPU of host $1 had the lowest mean utilization over the
-- window that starts at $2, ties broken by the most free memory now.
-- Reads gpu_samples, including the rows a running recorder still holds in
-- its write-ahead log, so the window is the last seconds, not the last file.
--
-- Parameters:
--   $1  host name (Utf8)
--   $2  window start (Timestamp, UTC); the window ends at the newest sample
--
-- Output, one row per GPU, best first:
--   gpu_index      NVML index (what CUDA_VISIBLE_DEVICES takes)
--   gpu_uuid       GPU UUID
--   mean_util_pct  interval-weighted mean of gpu_util_pct over the window (%)
--   free_bytes     fb_total_bytes - fb_used_bytes at the GPU's newest sample (bytes)
--   newest         time of the GPU's newest sample (UTC)
--   samples        samples in the window
SELECT
  gpu_index,
  gpu_uuid,
  sum(CAST(gpu_util_pct AS DOUBLE) * interval_ms)
    / sum(CASE WHEN gpu_util_pct IS NOT NULL THEN interval_ms END) AS mean_util_pct,
  last_value(fb_total_bytes - fb_used_bytes ORDER BY ts) AS free_bytes,
  max(ts) AS newest,
  count(*) AS samples
FROM gpu_samples
WHERE host = $1
  AND date >= CAST($2 AS DATE)
  AND ts >= $2
GROUP BY gpu_index, gpu_uuid
ORDER BY mean_util_pct ASC NULLS LAST, free_bytes DESC NULLS LAST, gpu_index ASC
