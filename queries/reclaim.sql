-- reclaim: GPUs idle for a long stretch without a break, to hand back.
--
-- Answers: which GPUs were idle (gpu_minute_states: idle_held or
-- idle_empty) for at least $1 minutes in a row, since when, and who held
-- memory on them meanwhile (proc_minute_states: held, the user as shown
-- there) or was allocated it by the cluster (alloc_minute_states: the pods
-- and Slurm jobs, with the first minute of the period each held the GPU).
-- A minute with no samples, and a minute whose activity is
-- unknown, breaks a stretch: neither is ever taken for idle. A partitioned
-- GPU's own row (the MIG slices no instance holds) is not a candidate:
-- nobody holds that capacity, the MIG layout leaves it unused (`apron
-- reclaim` lists it apart with its cost).
--
-- apron registers gpu_minute_states, proc_minute_states and alloc_minute_states for the period
-- and the config wherever a query reads them (also under `apron sql`).
--
-- Parameters:
--   $1  minimum stretch (minutes), reclaim.for (--for)
--
-- Output, one row per idle stretch, longest first:
--   host          host name
--   gpu_index     NVML index
--   gpu_uuid      GPU UUID
--   idle_since    first minute of the stretch (UTC)
--   idle_minutes  length of the stretch (minutes)
--   idle_gpu_hours  GPU time in it (GPU-hours: a MIG instance's minutes
--                 counted by its share of its GPU's slices)
--   held_by       users whose processes held GPU memory during it ("uid N" or
--                 "(unknown)" when the name is not known), comma-separated; empty if none
--   allocated_to  pods ("pod NAMESPACE/POD") and Slurm jobs ("job N") the GPU was allocated to
--                 during it, comma-separated; empty if none
--   allocated_since  the first minute of the period one of them held the GPU (UTC; null if none)
--   still_idle    whether the stretch runs up to the GPU's newest recorded minute
WITH newest AS (
  SELECT gpu_uuid, max(minute) AS newest_minute FROM gpu_minute_states GROUP BY gpu_uuid
),
idle AS (
  -- Consecutive idle minutes share a group: minute number minus rank.
  SELECT
    host, gpu_index, gpu_uuid, minute, capacity_share,
    CAST(to_unixtime(minute) AS BIGINT) / 60
      - row_number() OVER (PARTITION BY gpu_uuid ORDER BY minute) AS grp
  FROM gpu_minute_states
  WHERE state IN ('idle_held', 'idle_empty') AND NOT partitioned
),
holders AS (
  SELECT gpu_uuid, minute, "user"
  FROM proc_minute_states
  WHERE held
  GROUP BY gpu_uuid, minute, "user"
),
stretches AS (
  SELECT host, gpu_index, gpu_uuid, grp, min(minute) AS idle_since, max(minute) AS last_minute,
         count(*) AS idle_minutes, sum(capacity_share) / 60.0 AS idle_gpu_hours
  FROM idle
  GROUP BY host, gpu_index, gpu_uuid, grp
  HAVING count(*) >= $1
),
-- Who the cluster allocated each GPU to, minute by minute, and the first
-- minute of the period each holder held it.
alloc_holders AS (
  SELECT gpu_uuid, minute, holder FROM alloc_minute_states GROUP BY gpu_uuid, minute, holder
),
alloc_first AS (
  SELECT gpu_uuid, holder, min(minute) AS first_minute FROM alloc_holders GROUP BY gpu_uuid, holder
),
stretch_allocs AS (
  SELECT
    s.gpu_uuid,
    s.idle_since,
    array_to_string(array_sort(array_distinct(array_agg(a.holder))), ',') AS allocated_to,
    min(f.first_minute) AS allocated_since
  FROM stretches s
  JOIN alloc_holders a ON a.gpu_uuid = s.gpu_uuid AND a.minute >= s.idle_since AND a.minute <= s.last_minute
  JOIN alloc_first f ON f.gpu_uuid = a.gpu_uuid AND f.holder = a.holder
  GROUP BY s.gpu_uuid, s.idle_since
)
SELECT
  s.host,
  s.gpu_index,
  s.gpu_uuid,
  s.idle_since,
  s.idle_minutes,
  s.idle_gpu_hours,
  coalesce(array_to_string(array_sort(array_distinct(array_agg(h."user"))), ','), '') AS held_by,
  coalesce(x.allocated_to, '') AS allocated_to,
  x.allocated_since,
  s.last_minute = n.newest_minute AS still_idle
FROM stretches s
JOIN newest n ON n.gpu_uuid = s.gpu_uuid
LEFT JOIN holders h ON h.gpu_uuid = s.gpu_uuid AND h.minute >= s.idle_since AND h.minute <= s.last_minute
LEFT JOIN stretch_allocs x ON x.gpu_uuid = s.gpu_uuid AND x.idle_since = s.idle_since
GROUP BY s.host, s.gpu_index, s.gpu_uuid, s.idle_since, s.idle_minutes, s.idle_gpu_hours, s.last_minute,
         n.newest_minute, x.allocated_to, x.allocated_since
ORDER BY s.idle_minutes DESC, s.host, s.gpu_index, s.idle_since
