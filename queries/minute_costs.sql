-- minute_costs: every GPU-minute of a period, priced, with its state, and
-- attributed to the processes on it: the one definition of cost behind
-- spend, idle-cost, windows and the charts.
--
-- Answers, per docs/src/definitions.md: each GPU-minute of
-- gpu_minute_states (its seconds, activity, energy and state: busy,
-- idle_held, idle_empty or unknown) costs
--   seconds × capacity_share × apron_gpu_rate(gpu_model)
--     + energy_kWh × price_per_kwh × pue
-- (capacity_share: 1 for a whole GPU; a MIG instance's share of its
-- parent's compute slices, its energy already that share of the parent's;
-- the slices no instance holds stay with the parent: so the hardware's
-- minute is priced once)
-- (apron_gpu_rate: the first [[gpu_cost]] entry whose model is the GPU's
-- or "*", else the built-in default: purchase_price / lifetime +
-- ops_per_gpu_hour, per second) and is split among the minute's processes
-- (proc_minute_states), each with its team and user as proc_minute_states
-- gives them:
--   - a busy minute whose processes all have their own SM utilization from
--     NVML, summing above 0 (a GPU time-sliced between processes that
--     compute): by their share of SM-time (sm_util_pct × seconds), so the
--     process that computed pays for the computing;
--   - every other minute (idle-held and unknown ones, one process, a
--     process without SM utilization): by their share of memory-time
--     (used_mem_bytes × seconds; equal shares when none held measurable
--     memory): whoever holds the GPU pays for holding it.
-- A minute with no process that the cluster had allocated to pods or Slurm
-- jobs (alloc_minute_states) is split among those holders by the seconds
-- each held it, each with its team and user as alloc_minute_states gives
-- them: a GPU allocated but unused is paid for by whoever it is allocated
-- to. A minute with neither, and every idle-empty minute, belongs to
-- "(unallocated)"; an unknown minute is attributed like a busy one. Energy that was not measured counts 0 J here
-- (gpu_minute_states.energy_unknown_seconds says for how long).
--
-- apron registers gpu_minute_states, proc_minute_states and alloc_minute_states for the period
-- and the config, and the config's prices as the table apron_gpu_rates
-- (analyze/src/config/tables.rs; `apron export-config` writes it for other
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
--   pid           the owner's pid (null for an allocation's holder and for "(unallocated)")
--   holder        the allocation's holder ("pod NAMESPACE/POD" or "job N") when the owner is one (null otherwise)
--   share         the owner's share of the minute, 0–1
--   seconds       GPU-seconds: recorded seconds × capacity_share × share (s)
--   energy_j      energy × share (J; 0 when not known)
--   cost          cost × share (currency)
--   parent_gpu_uuid, mig_profile  MIG: an instance's parent GPU and profile (null otherwise)
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
    s.seconds * s.capacity_share * g.rate_per_second + s.energy_j / 3600000.0 * $1 * $2 AS cost
  FROM gpu_minute_states s
  JOIN rates m ON m.gpu_model IS NOT DISTINCT FROM s.gpu_model
  JOIN apron_gpu_rates g ON g.position = m.position
),
totals AS (
  SELECT
    gpu_uuid,
    minute,
    sum(mem_time) AS mem_time,
    sum(sm_time) AS sm_time,
    bool_and(sm_known) AS sm_known,
    count(*) AS procs
  FROM proc_minute_states
  GROUP BY gpu_uuid, minute
),
-- The allocations of minutes no process ran in, and their seconds.
allocated AS (
  SELECT a.*
  FROM alloc_minute_states a
  LEFT JOIN totals t ON t.gpu_uuid = a.gpu_uuid AND t.minute = a.minute
  WHERE t.gpu_uuid IS NULL
),
alloc_totals AS (
  SELECT gpu_uuid, minute, sum(seconds) AS seconds, count(*) AS holders
  FROM allocated
  GROUP BY gpu_uuid, minute
),
owners AS (
  SELECT
    p.gpu_uuid,
    p.minute,
    p.pid,
    CAST(NULL AS VARCHAR) AS holder,
    p.team,
    p."user",
    CASE WHEN t.mem_time > 0 THEN p.mem_time / t.mem_time ELSE 1.0 / t.procs END AS mem_share,
    CASE WHEN t.sm_known AND t.sm_time > 0 THEN p.sm_time / t.sm_time END AS sm_share
  FROM proc_minute_states p
  JOIN totals t ON t.gpu_uuid = p.gpu_uuid AND t.minute = p.minute
  UNION ALL
  SELECT
    a.gpu_uuid,
    a.minute,
    CAST(NULL AS INT) AS pid,
    a.holder,
    a.team,
    a."user",
    CASE WHEN t.seconds > 0 THEN a.seconds / t.seconds ELSE 1.0 / t.holders END AS mem_share,
    CAST(NULL AS DOUBLE) AS sm_share
  FROM allocated a
  JOIN alloc_totals t ON t.gpu_uuid = a.gpu_uuid AND t.minute = a.minute
),
attributed AS (
  SELECT
    c.*,
    o.team AS owner_team,
    o."user" AS owner_user,
    o.pid,
    o.holder,
    CASE
      WHEN o.gpu_uuid IS NULL THEN 1.0
      WHEN c.state = 'busy' AND o.sm_share IS NOT NULL THEN o.sm_share
      ELSE o.mem_share
    END AS share
  FROM priced c
  LEFT JOIN owners o
    ON o.gpu_uuid = c.gpu_uuid AND o.minute = c.minute AND c.state <> 'idle_empty'
)
SELECT
  host,
  gpu_index,
  gpu_uuid,
  gpu_model,
  minute,
  state,
  util_pct,
  activity_pct,
  coalesce(owner_team, '(unallocated)') AS team,
  coalesce(owner_user, '(unallocated)') AS "user",
  pid,
  holder,
  share,
  seconds * capacity_share * share AS seconds,
  energy_j * share AS energy_j,
  cost * share AS cost,
  parent_gpu_uuid,
  mig_profile
FROM attributed
