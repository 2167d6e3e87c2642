-- minute_costs: every GPU-minute of a period, priced, with its state, and
-- attributed to the processes on it: the one definition of cost behind
-- spend, idle-cost, windows and the charts.
--
-- Answers, per DESIGN.md's definitions: each GPU-minute of
-- gpu_minute_states (its seconds, activity, energy and state: busy,
-- idle_held, idle_empty or unknown) costs
--   seconds × apron_gpu_rate(gpu_model) + energy_kWh × price_per_kwh × pue
-- (apron_gpu_rate: the first [[gpu_cost]] entry whose model is the GPU's
-- or "*", else the built-in default: purchase_price / lifetime +
-- ops_per_gpu_hour, per second) and is split among the minute's processes (proc_minute_states) by their
-- share of memory-time (used_mem_bytes × seconds; equal shares when none
-- held measurable memory), each with its team and user as
-- proc_minute_states gives them. A minute with no process, and every
-- idle-empty minute, belongs to "(unallocated)"; an unknown minute is
-- attributed like a busy one. Energy that was not measured counts 0 J here
-- (gpu_minute_states.energy_unknown_seconds says for how long).
--
-- apron registers gpu_minute_states and proc_minute_states for the period
-- and the config, and the config's prices as the table apron_gpu_rates
-- (analyze/src/config_tables.rs; `apron export-config` writes it for other
-- engines), wherever a query reads minute_costs (also under `apron sql`).
-- Plain SQL, no apron function: `apron export-sql` runs it on Spark, Trino
-- or Athena.
--
-- Parameters:
--   $1  energy price (currency per kWh), energy.price_per_kwh
--   $2  power usage effectiveness, energy.pue
--
-- Output, one row per GPU-minute and owner (a process, or "(unallocated)"):
--   host, gpu_index, gpu_uuid, gpu_model  the GPU
--   minute        start of the UTC minute
--   state         busy | idle_held | idle_empty | unknown
--   util_pct      the GPU's mean gpu_util_pct in the minute (%; null: unknown)
--   activity_pct  util_pct where known, else mean sm_active_pct (%; null: unknown)
--   team          the owner's team, "unassigned", or "(unallocated)"
--   user          the owner's user name ("(unallocated)"; "uid N" or "(unknown)" when the name is not known)
--   pid           the owner's pid (null for "(unallocated)")
--   share         the owner's share of the minute, 0–1
--   seconds       recorded seconds × share (s)
--   energy_j      energy × share (J; 0 when not known)
--   cost          cost × share (currency)
WITH models AS (
  SELECT DISTINCT gpu_model FROM gpu_minute_states
),
-- Each model's entry: the lowest position whose model is its own or "*"
-- (apron_gpu_rates ends with a "*" entry, so every model has one).
rates AS (
  SELECT m.gpu_model, min(r.position) AS position
  FROM models m
  JOIN apron_gpu_rates r ON r.model = '*' OR r.model = m.gpu_model
  GROUP BY m.gpu_model
),
priced AS (
  SELECT
    s.*,
    s.seconds * g.rate_per_second + s.energy_j / 3600000.0 * $1 * $2 AS cost
  FROM gpu_minute_states s
  JOIN rates m ON m.gpu_model IS NOT DISTINCT FROM s.gpu_model
  JOIN apron_gpu_rates g ON g.position = m.position
),
totals AS (
  SELECT gpu_uuid, minute, sum(mem_time) AS mem_time, count(*) AS procs
  FROM proc_minute_states
  GROUP BY gpu_uuid, minute
),
owners AS (
  SELECT
    p.gpu_uuid,
    p.minute,
    p.pid,
    p.team,
    p."user",
    CASE WHEN t.mem_time > 0 THEN p.mem_time / t.mem_time ELSE 1.0 / t.procs END AS share
  FROM proc_minute_states p
  JOIN totals t ON t.gpu_uuid = p.gpu_uuid AND t.minute = p.minute
)
SELECT
  c.host,
  c.gpu_index,
  c.gpu_uuid,
  c.gpu_model,
  c.minute,
  c.state,
  c.util_pct,
  c.activity_pct,
  coalesce(o.team, '(unallocated)') AS team,
  coalesce(o."user", '(unallocated)') AS "user",
  o.pid,
  coalesce(o.share, 1.0) AS share,
  c.seconds * coalesce(o.share, 1.0) AS seconds,
  c.energy_j * coalesce(o.share, 1.0) AS energy_j,
  c.cost * coalesce(o.share, 1.0) AS cost
FROM priced c
LEFT JOIN owners o
  ON o.gpu_uuid = c.gpu_uuid AND o.minute = c.minute AND c.state <> 'idle_empty'
