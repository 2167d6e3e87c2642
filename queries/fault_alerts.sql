-- fault_alerts: the fault alert rules, per GPU, at one moment.
--
-- Answers, from gpu_events (the driver's events, GPUs lost and back, the
-- error counters that moved): which GPUs had an XID in the window, which
-- had uncorrectable ECC errors in it (double-bit ECC events, or the
-- volatile uncorrected counter growing; the larger of the two, as both
-- report the same errors), which have a row remapping pending (their
-- newest remap_pending reading of the last 7 days is 1), and which were
-- lost and have not answered since (their newest gpu_lost of the last 7
-- days is later than their newest gpu_back).
--
-- Parameters:
--   $1  now (Timestamp, UTC)
--   $2  window start (Timestamp, UTC): now minus [alerts] faults
--
-- Output, one row per rule that fires on a GPU (xid: per GPU and code):
--   rule       xid | ecc_uncorrectable | remap_pending | gpu_lost
--   host       host name
--   gpu_index  NVML index
--   gpu_uuid   GPU UUID
--   value      xid: the XID code; ecc_uncorrectable: errors in the window;
--              remap_pending: 1; gpu_lost: minutes since it was lost
--   since      xid, ecc_uncorrectable: the first in the window (UTC);
--              remap_pending: the reading that found it set; gpu_lost: when it was lost
WITH recent AS (
  SELECT host, gpu_index, gpu_uuid, kind, xid, value, delta, ts
  FROM gpu_events
  WHERE ts >= $1 - INTERVAL '7 days' AND ts < $1
    AND date >= CAST($1 - INTERVAL '7 days' AS DATE)
),
xids AS (
  SELECT 'xid' AS rule, host, gpu_index, gpu_uuid, CAST(xid AS DOUBLE) AS value, min(ts) AS since
  FROM recent
  WHERE kind = 'xid' AND ts >= $2 AND xid IS NOT NULL
  GROUP BY host, gpu_index, gpu_uuid, xid
),
ecc AS (
  SELECT 'ecc_uncorrectable' AS rule, host, gpu_index, gpu_uuid,
    CAST(greatest(
      sum(CASE WHEN kind = 'ecc_dbe' THEN 1 ELSE 0 END),
      sum(CASE WHEN kind = 'ecc_uncorrected' THEN delta ELSE 0 END)) AS DOUBLE) AS value,
    min(ts) AS since
  FROM recent
  WHERE ts >= $2 AND (kind = 'ecc_dbe' OR (kind = 'ecc_uncorrected' AND delta > 0))
  GROUP BY host, gpu_index, gpu_uuid
),
remap AS (
  SELECT host, gpu_index, gpu_uuid, last_value(value ORDER BY ts) AS pending, max(ts) AS read_at
  FROM recent
  WHERE kind = 'remap_pending'
  GROUP BY host, gpu_index, gpu_uuid
),
lost AS (
  SELECT host, gpu_index, gpu_uuid,
    max(CASE WHEN kind = 'gpu_lost' THEN ts END) AS lost_at,
    max(CASE WHEN kind = 'gpu_back' THEN ts END) AS back_at
  FROM recent
  WHERE kind IN ('gpu_lost', 'gpu_back')
  GROUP BY host, gpu_index, gpu_uuid
)
SELECT rule, host, gpu_index, gpu_uuid, value, since FROM xids
UNION ALL
SELECT rule, host, gpu_index, gpu_uuid, value, since FROM ecc
UNION ALL
SELECT 'remap_pending' AS rule, host, gpu_index, gpu_uuid, 1.0 AS value, read_at AS since
FROM remap WHERE pending = 1
UNION ALL
SELECT 'gpu_lost' AS rule, host, gpu_index, gpu_uuid,
  (CAST($1 AS BIGINT) - CAST(lost_at AS BIGINT)) / 60000.0 AS value, lost_at AS since
FROM lost WHERE lost_at IS NOT NULL AND (back_at IS NULL OR back_at < lost_at)
ORDER BY rule, host, gpu_index, value
