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
-- MIG: each instance is a candidate of its own, ranked by its SM activity
-- (sm_active_pct: an instance has no gpu_util_pct), and named by its
-- MIG-… UUID, which is what CUDA_VISIBLE_DEVICES takes for it; a
-- partitioned GPU's own row is no candidate (nothing runs on it but its
-- instances).
--
-- Output, one row per GPU, best first:
--   gpu_index      NVML index (an instance's: its parent's)
--   gpu_uuid       GPU UUID (an instance's MIG-… UUID)
--   mean_util_pct  interval-weighted mean activity over the window: gpu_util_pct, else sm_active_pct (%)
--   free_bytes     fb_total_bytes - fb_used_bytes at the GPU's newest sample (bytes)
--   newest         time of the GPU's newest sample (UTC)
--   samples        samples in the window
--   device         what CUDA_VISIBLE_DEVICES takes: the index, or an instance's MIG-… UUID
SELECT
  gpu_index,
  gpu_uuid,
  sum(CAST(coalesce(gpu_util_pct, sm_active_pct) AS DOUBLE) * interval_ms)
    / sum(CASE WHEN coalesce(gpu_util_pct, sm_active_pct) IS NOT NULL THEN interval_ms END) AS mean_util_pct,
  last_value(fb_total_bytes - fb_used_bytes ORDER BY ts) AS free_bytes,
  max(ts) AS newest,
  count(*) AS samples,
  CASE WHEN max(parent_gpu_uuid) IS NOT NULL THEN gpu_uuid ELSE CAST(gpu_index AS VARCHAR) END AS device
FROM gpu_samples
WHERE host = $1
  AND date >= CAST($2 AS DATE)
  AND ts >= $2
  AND (mig_total_slices IS NULL OR parent_gpu_uuid IS NOT NULL)
GROUP BY gpu_index, gpu_uuid
ORDER BY mean_util_pct ASC NULLS LAST, free_bytes DESC NULLS LAST, gpu_index ASC, gpu_uuid ASC
