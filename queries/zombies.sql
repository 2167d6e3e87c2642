-- zombies: processes holding GPU memory on a GPU that sits idle.
--
-- Answers: which processes held at least $1 bytes of GPU memory (or an
-- unknown amount: NVML lists a process on a GPU only while it holds a
-- context there) while their GPU's minutes were idle (gpu_minute_states:
-- idle_held) for at least $2 minutes in a row. A minute in which the GPU
-- or the process was not recorded, or whose activity is unknown, breaks
-- the stretch. Who the process is, its user as shown and its team come
-- from proc_minute_states.
--
-- A stretch during which the GPU moved data over PCIe at a mean of at
-- least $3 MiB/s (received plus sent, each the seconds-weighted mean of
-- its minutes where known) is not a zombie's but a data-starved process's
-- (queries/starved.sql lists those): it is left out here. A stretch
-- whose traffic is unknown throughout (a MIG instance's is its parent's)
-- stays a zombie.
--
-- apron registers gpu_minute_states and proc_minute_states for the period
-- and the config wherever a query reads them (also under `apron sql`).
--
-- Parameters:
--   $1  least memory held (bytes), zombie.min_mem_mib × 2^20
--   $2  shortest stretch (minutes), zombie.min_idle
--   $3  least PCIe traffic of a data-starved process (MiB per second), zombie.starved_pcie_mib_per_s; 0: none is
--
-- Output, one row per stretch, most memory-minutes first:
--   host, gpu_index, gpu_uuid  the GPU
--   pid, proc_start (UTC), comm  the process
--   user            its user name, "uid N", or "(unknown)"
--   team            its team by the config's rules, or "unassigned"
--   used_mem_bytes  most memory it held during the stretch (bytes; null: unknown throughout)
--   idle_since      first minute of the stretch (UTC)
--   idle_minutes    length of the stretch (minutes)
--   still_running   whether the process is in its GPU's newest recorded minute (it exists)
--   still_idle      whether the stretch runs up to its GPU's newest recorded minute (idle now)
WITH newest AS (
  SELECT gpu_uuid, max(minute) AS newest_minute FROM gpu_minute_states GROUP BY gpu_uuid
),
held_idle AS (
  -- Consecutive qualifying minutes of one process share a group.
  SELECT
    g.host, g.gpu_index, g.seconds AS gpu_seconds, g.pcie_rx_bytes_per_s, g.pcie_tx_bytes_per_s, p.*,
    CAST(to_unixtime(p.minute) AS BIGINT) / 60
      - row_number() OVER (PARTITION BY p.gpu_uuid, p.pid, p.proc_start ORDER BY p.minute) AS grp
  FROM proc_minute_states p
  JOIN gpu_minute_states g ON g.gpu_uuid = p.gpu_uuid AND g.minute = p.minute
  WHERE g.state = 'idle_held' AND p.held AND (p.used_mem_bytes >= $1 OR p.used_mem_bytes IS NULL)
),
last_seen AS (
  SELECT gpu_uuid, pid, proc_start, max(minute) AS last_minute
  FROM proc_minute_states
  GROUP BY gpu_uuid, pid, proc_start
),
stretches AS (
  SELECT
    h.host,
    h.gpu_index,
    h.gpu_uuid,
    h.pid,
    h.proc_start,
    last_value(h.comm ORDER BY h.minute) AS comm,
    last_value(h."user" ORDER BY h.minute) AS "user",
    last_value(h.team ORDER BY h.minute) AS team,
    max(h.used_mem_bytes) AS used_mem_bytes,
    min(h.minute) AS idle_since,
    count(*) AS idle_minutes,
    max(l.last_minute) = max(n.newest_minute) AS still_running,
    max(h.minute) = max(n.newest_minute) AS still_idle,
    sum(h.pcie_rx_bytes_per_s * h.gpu_seconds)
      / sum(CASE WHEN h.pcie_rx_bytes_per_s IS NOT NULL THEN h.gpu_seconds END) / 1048576.0 AS pcie_rx_mib_per_s,
    sum(h.pcie_tx_bytes_per_s * h.gpu_seconds)
      / sum(CASE WHEN h.pcie_tx_bytes_per_s IS NOT NULL THEN h.gpu_seconds END) / 1048576.0 AS pcie_tx_mib_per_s
  FROM held_idle h
  JOIN newest n ON n.gpu_uuid = h.gpu_uuid
  JOIN last_seen l ON l.gpu_uuid = h.gpu_uuid AND l.pid = h.pid
    AND l.proc_start IS NOT DISTINCT FROM h.proc_start
  GROUP BY h.host, h.gpu_index, h.gpu_uuid, h.pid, h.proc_start, h.grp
  HAVING count(*) >= $2
)
SELECT
  host, gpu_index, gpu_uuid, pid, proc_start, comm, "user", team,
  used_mem_bytes, idle_since, idle_minutes, still_running, still_idle
FROM stretches
WHERE NOT ($3 > 0 AND coalesce(pcie_rx_mib_per_s, 0.0) + coalesce(pcie_tx_mib_per_s, 0.0) >= $3)
ORDER BY coalesce(used_mem_bytes, 0) * idle_minutes DESC, host, gpu_index, pid, idle_since
