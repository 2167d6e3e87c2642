-- events: what went wrong with the GPUs over the period, one row per GPU
-- and fault.
--
-- Answers: the rows of gpu_events (the driver's XID and ECC events, GPUs
-- lost and back, error counters that moved; see the recording docs) from
-- $1 up to $2, grouped per GPU and fault (kind, XID code, detail): how
-- many, the first and the last, how much a counter grew and its newest
-- reading, and the processes that were on the GPU in the minute of the
-- last one (whose job it hit). `apron events` adds each fault's meaning,
-- the action it calls for (NVIDIA's XID catalogue for XIDs) and whether
-- the GPU should be drained.
--
-- Parameters:
--   $1  period start (UTC timestamp, inclusive)
--   $2  period end (UTC timestamp, exclusive)
--
-- Output, one row per (GPU, kind, xid, detail), the latest fault first:
--   host, gpu_index, gpu_uuid  the GPU (or MIG instance)
--   kind        what happened: xid, ecc_sbe, ecc_dbe, gpu_lost, gpu_back,
--               or the counter that moved (ecc_uncorrected, remap_pending, …)
--   xid         the XID code (kind xid), else null
--   detail      what the source added (an NVLink and counter, a lost GPU's error)
--   events      rows: events, or readings of the counter that moved
--   first_at    the first of them (UTC)
--   last_at     the last of them (UTC)
--   increase    how much the counter grew over the period (sum of delta;
--               null for an event, or a counter only seen at its first reading)
--   last_value  the counter's newest reading (a state: 1 set, 0 cleared), else null
--   on_gpu      the processes on the GPU in the minute of last_at, as
--               "user comm (pid)", comma-separated; empty if none was
WITH ev AS (
  SELECT host, gpu_index, gpu_uuid, kind, xid, detail, ts, value, delta
  FROM gpu_events
  WHERE ts >= $1 AND ts < $2
    AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
),
grouped AS (
  SELECT
    host, gpu_index, gpu_uuid, kind, xid, detail,
    count(*) AS events,
    min(ts) AS first_at,
    max(ts) AS last_at,
    sum(delta) AS increase,
    last_value(value ORDER BY ts) AS last_value
  FROM ev
  GROUP BY host, gpu_index, gpu_uuid, kind, xid, detail
),
procs AS (
  SELECT
    g.host, g.gpu_uuid, g.kind, g.xid, g.detail,
    string_agg(DISTINCT concat(
      CASE WHEN p."user" IS NOT NULL THEN p."user"
           WHEN p.uid IS NOT NULL THEN concat('uid ', CAST(p.uid AS VARCHAR))
           ELSE '(unknown)' END,
      ' ', coalesce(p.comm, '?'), ' (', CAST(p.pid AS VARCHAR), ')'), ', ') AS on_gpu
  FROM grouped g
  JOIN proc_minutes p
    ON p.host = g.host AND p.gpu_uuid = g.gpu_uuid AND p.minute = date_trunc('minute', g.last_at)
       AND p.date = CAST(g.last_at AS DATE)
       -- last_at is in the period: these bounds change nothing but let the
       -- engine list only the period's proc_minutes folders.
       AND p.date >= CAST($1 AS DATE) AND p.date <= CAST($2 AS DATE)
  GROUP BY g.host, g.gpu_uuid, g.kind, g.xid, g.detail
)
SELECT
  g.host, g.gpu_index, g.gpu_uuid, g.kind, g.xid, g.detail, g.events, g.first_at, g.last_at,
  g.increase, g.last_value, coalesce(p.on_gpu, '') AS on_gpu
FROM grouped g
LEFT JOIN procs p
  ON p.host = g.host AND p.gpu_uuid = g.gpu_uuid AND p.kind = g.kind
     AND (p.xid IS NOT DISTINCT FROM g.xid) AND (p.detail IS NOT DISTINCT FROM g.detail)
ORDER BY g.last_at DESC, g.host, g.gpu_index, g.kind, g.xid, g.detail
