-- gpu_minute_states: every GPU-minute of a period with its state: the one
-- definition of busy, idle-held, idle-empty and unknown that every report
-- reads (minute_costs, zombies, reclaim, and through minute_costs spend,
-- idle-cost, windows and the charts).
--
-- Answers, per docs/src/definitions.md: a GPU-minute is one GPU over one
-- UTC minute, its rollup rows aggregated by (gpu_uuid, minute) (a minute
-- split across two files has a row in each). Its seconds are the recorded
-- seconds. Its activity is the seconds-weighted mean gpu_util_pct where
-- known, else the mean sm_active_pct (GPM; MIG instances report only
-- that). It is
--   unknown     when neither is known: priced and attributed like any
--               minute, never counted as idle or as busy;
--   busy        when its activity is at or above the idle threshold ($3);
--   idle_held   else, when the GPU was held in the minute: some process
--               held GPU memory on it (a proc_minutes row with
--               used_mem_bytes_max above 0 or unknown: the rollups'
--               proc_held; see proc_minute_states for who), or the
--               cluster had allocated it to a pod or a Slurm job, whether
--               or not a process of it ran there (an alloc_minutes row;
--               see alloc_minute_states for who);
--   idle_empty  else.
-- Its energy is each part's energy_j (per sample the energy counter's
-- delta, else power × interval: see apron_recorder::rollup), else the
-- part's power_mw_mean × seconds; a part with neither counts 0 J and its
-- seconds are energy_unknown_seconds, which every cost report states in
-- its header. Unrecorded time has no row at all.
--
-- MIG: a MIG instance (a row with parent_gpu_uuid) is a GPU of its own,
-- its state from its own activity and processes, and it stands for
-- capacity_share = mig_slices / mig_total_slices of its parent: its energy
-- is the parent's minute's energy (and energy_unknown_seconds) × that
-- share. The partitioned GPU's own row (mig_total_slices without a
-- parent) keeps the slices no instance holds: capacity_share = 1 − the
-- instances' shares that minute, energy × that share, state idle_empty
-- (capacity nobody can use until an instance is made), and no row at all
-- when every slice is assigned. A whole GPU has capacity_share 1. So a
-- minute of hardware is never counted twice: the capacity shares of a
-- GPU and its instances add up to 1.
--
-- apron registers it as the view gpu_minute_states for the period and the
-- config's idle threshold wherever a query reads it (also under
-- `apron sql`).
--
-- Parameters:
--   $1  period start (Timestamp, UTC, inclusive)
--   $2  period end (Timestamp, UTC, exclusive)
--   $3  idle threshold (%), idle.threshold_pct
--
-- Output, one row per GPU-minute:
--   host, gpu_index, gpu_uuid, gpu_model  the GPU (its last known index and model)
--   minute                  start of the UTC minute
--   seconds                 recorded seconds (s)
--   util_pct                mean gpu_util_pct (%; null: unknown)
--   sm_active_pct           mean sm_active_pct (%; null: unknown)
--   activity_pct            util_pct where known, else sm_active_pct (%; null: unknown)
--   energy_j                energy drawn (J; measured or power × time, 0 where neither)
--   energy_known            whether every part of the minute had energy or power
--   energy_unknown_seconds  seconds with neither energy nor power (s)
--   held                    whether the GPU was held: proc_held or allocated
--   proc_held               whether some process held memory on the GPU
--   allocated               whether the cluster had allocated the GPU to a pod or a Slurm job
--   procs                   processes on the GPU in the minute (a lower bound when split)
--   state                   busy | idle_held | idle_empty | unknown
--   parent_gpu_uuid, mig_profile  MIG: an instance's parent GPU and profile (null otherwise)
--   capacity_share          the part of a physical GPU the row stands for (0–1; 1 for a whole GPU)
--   partitioned             whether the row is a partitioned GPU's own: the slices no MIG instance holds
--   pcie_tx_bytes_per_s, pcie_rx_bytes_per_s  mean PCIe traffic out of and into the GPU (bytes/s;
--                           null: unknown, as for a MIG instance, whose traffic is its parent's)
WITH gpu AS (
  SELECT
    gpu_uuid,
    minute,
    max(host) AS host,
    max(gpu_index) AS gpu_index,
    max(gpu_model) AS gpu_model,
    sum(seconds) AS seconds,
    sum(gpu_util_pct_mean * seconds)
      / sum(CASE WHEN gpu_util_pct_mean IS NOT NULL THEN seconds END) AS util_pct,
    sum(sm_active_pct_mean * seconds)
      / sum(CASE WHEN sm_active_pct_mean IS NOT NULL THEN seconds END) AS sm_active_pct,
    coalesce(sum(coalesce(energy_j, power_mw_mean * seconds / 1000.0)), 0.0) AS energy_j,
    coalesce(sum(CASE WHEN energy_j IS NULL AND power_mw_mean IS NULL THEN seconds END), 0.0)
      AS energy_unknown_seconds,
    bool_or(proc_held) AS held,
    max(proc_count) AS procs,
    sum(pcie_tx_bytes_per_s_mean * seconds)
      / sum(CASE WHEN pcie_tx_bytes_per_s_mean IS NOT NULL THEN seconds END) AS pcie_tx_bytes_per_s,
    sum(pcie_rx_bytes_per_s_mean * seconds)
      / sum(CASE WHEN pcie_rx_bytes_per_s_mean IS NOT NULL THEN seconds END) AS pcie_rx_bytes_per_s,
    max(parent_gpu_uuid) AS parent_gpu_uuid,
    max(mig_profile) AS mig_profile,
    max(mig_slices) AS mig_slices,
    max(mig_total_slices) AS mig_total_slices
  FROM gpu_minutes
  WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  GROUP BY gpu_uuid, minute
),
-- The MIG rows alone, from a scan of their own: on a fleet without MIG it
-- reads no row (the columns are null throughout, which the files'
-- statistics say), so the joins below cost next to nothing there.
mig AS (
  SELECT
    gpu_uuid,
    minute,
    max(parent_gpu_uuid) AS parent_gpu_uuid,
    CAST(max(mig_slices) AS DOUBLE) / nullif(max(mig_total_slices), 0) AS share,
    coalesce(sum(coalesce(energy_j, power_mw_mean * seconds / 1000.0)), 0.0) AS energy_j,
    coalesce(sum(CASE WHEN energy_j IS NULL AND power_mw_mean IS NULL THEN seconds END), 0.0)
      AS energy_unknown_seconds
  FROM gpu_minutes
  WHERE mig_total_slices IS NOT NULL
    AND minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  GROUP BY gpu_uuid, minute
),
-- The GPU-minutes the cluster had allocated to someone.
allocated_gpus AS (
  SELECT gpu_uuid, minute
  FROM alloc_minutes
  WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  GROUP BY gpu_uuid, minute
),
-- Each partitioned GPU's minute: the share of its slices its instances hold.
assigned AS (
  SELECT parent_gpu_uuid, minute, sum(share) AS share
  FROM mig
  WHERE parent_gpu_uuid IS NOT NULL
  GROUP BY parent_gpu_uuid, minute
),
-- Each partitioned GPU's own minute: the hardware's energy.
hardware AS (
  SELECT gpu_uuid, minute, energy_j, energy_unknown_seconds FROM mig WHERE parent_gpu_uuid IS NULL
),
mig_shares AS (
  SELECT
    g.gpu_uuid,
    g.minute,
    g.host,
    g.gpu_index,
    g.gpu_model,
    g.seconds,
    g.util_pct,
    g.sm_active_pct,
    g.held AS proc_held,
    l.gpu_uuid IS NOT NULL AS allocated,
    g.procs,
    g.pcie_tx_bytes_per_s,
    g.pcie_rx_bytes_per_s,
    g.parent_gpu_uuid,
    g.mig_profile,
    CASE
      WHEN g.parent_gpu_uuid IS NOT NULL THEN CAST(g.mig_slices AS DOUBLE) / nullif(g.mig_total_slices, 0)
      WHEN g.mig_total_slices IS NOT NULL THEN greatest(1.0 - coalesce(a.share, 0.0), 0.0)
      ELSE 1.0
    END AS capacity_share,
    -- The hardware's energy: an instance's is its parent's.
    CASE WHEN g.parent_gpu_uuid IS NOT NULL THEN coalesce(p.energy_j, 0.0) ELSE g.energy_j END AS gpu_energy_j,
    CASE
      WHEN g.parent_gpu_uuid IS NOT NULL THEN coalesce(p.energy_unknown_seconds, g.seconds)
      ELSE g.energy_unknown_seconds
    END AS gpu_energy_unknown_seconds,
    g.mig_total_slices IS NOT NULL AND g.parent_gpu_uuid IS NULL AS partitioned
  -- The small sides first: a hash join holds its first side in memory.
  FROM assigned a
  RIGHT JOIN gpu g ON a.parent_gpu_uuid = g.gpu_uuid AND a.minute = g.minute
  LEFT JOIN hardware p ON p.gpu_uuid = g.parent_gpu_uuid AND p.minute = g.minute
  LEFT JOIN allocated_gpus l ON l.gpu_uuid = g.gpu_uuid AND l.minute = g.minute
),
active AS (
  SELECT
    *,
    coalesce(util_pct, sm_active_pct) AS activity_pct,
    proc_held OR allocated AS held,
    gpu_energy_j * capacity_share AS energy_j,
    gpu_energy_unknown_seconds * capacity_share AS energy_unknown_seconds
  FROM mig_shares
  -- Up to rounding: every slice held.
  WHERE capacity_share > 1e-9
)
SELECT
  host,
  gpu_index,
  gpu_uuid,
  gpu_model,
  minute,
  seconds,
  util_pct,
  sm_active_pct,
  activity_pct,
  energy_j,
  energy_unknown_seconds = 0.0 AS energy_known,
  energy_unknown_seconds,
  held,
  proc_held,
  allocated,
  procs,
  CASE
    WHEN partitioned THEN 'idle_empty'
    WHEN activity_pct IS NULL THEN 'unknown'
    WHEN activity_pct >= $3 THEN 'busy'
    WHEN held THEN 'idle_held'
    ELSE 'idle_empty'
  END AS state,
  parent_gpu_uuid,
  mig_profile,
  capacity_share,
  partitioned,
  pcie_tx_bytes_per_s,
  pcie_rx_bytes_per_s
FROM active
