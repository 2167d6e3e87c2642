-- gpu_minutes_from_raw: the gpu_minutes rollup computed from raw samples.
--
-- Answers: what the recorder's minute rollup would hold for the raw rows at
-- hand. apron runs it over the (date, host) partitions of gpu_samples that
-- have no gpu_minutes files (data imported or written by other tools), so
-- the minute tables, and every report over them, are complete on raw files
-- alone. Computed as apron_recorder::rollup computes it: interval-weighted
-- means over non-null values, energy from the energy counter's delta to the
-- GPU's previous sample when that sample is exactly one interval earlier
-- and the counter did not go back, else power × interval.
--
-- Parameters: none (apron narrows gpu_samples and proc_samples to the
-- partitions without rollups before running it).
--
-- Output: the columns of gpu_minutes (minute, gpu_uuid, gpu_index,
-- gpu_model, seconds, samples, gpu_util_pct_mean, gpu_util_pct_max,
-- mem_util_pct_mean, sm_active_pct_mean (GPM, %), fb_used_bytes_max, fb_total_bytes, energy_j (J),
-- power_mw_mean (mW), pcie_tx_bytes_per_s_mean, pcie_rx_bytes_per_s_mean,
-- proc_held, proc_count, parent_gpu_uuid, mig_profile, mig_slices,
-- mig_total_slices (MIG, the minute's last known), tensor_active_pct_mean,
-- dram_active_pct_mean (GPM, %)), then the partition
-- columns date and host.
WITH samples AS (
  SELECT
    *,
    CAST(ts AS BIGINT) AS ts_ms,
    lag(CAST(ts AS BIGINT)) OVER w AS prev_ts_ms,
    lag(energy_mj) OVER w AS prev_energy_mj
  FROM gpu_samples
  WINDOW w AS (PARTITION BY gpu_uuid ORDER BY ts)
),
energy AS (
  SELECT
    *,
    CASE
      WHEN energy_mj IS NOT NULL AND prev_energy_mj IS NOT NULL
        AND ts_ms - prev_ts_ms = interval_ms AND energy_mj >= prev_energy_mj
        THEN CAST(energy_mj - prev_energy_mj AS DOUBLE) / 1000.0
      ELSE CAST(power_mw AS DOUBLE) * interval_ms / 1000000.0
    END AS sample_energy_j
  FROM samples
),
procs AS (
  SELECT gpu_uuid, minute,
         bool_or(used_mem_bytes_max IS NULL OR used_mem_bytes_max > 0) AS proc_held,
         count(*) AS proc_count
  FROM (
    SELECT gpu_uuid, date_trunc('minute', ts) AS minute, pid, proc_start,
           max(used_mem_bytes) AS used_mem_bytes_max
    FROM proc_samples
    GROUP BY gpu_uuid, date_trunc('minute', ts), pid, proc_start
  )
  GROUP BY gpu_uuid, minute
),
minutes AS (
  SELECT
    date_trunc('minute', ts) AS minute,
    gpu_uuid,
    last_value(gpu_index ORDER BY ts) AS gpu_index,
    last_value(gpu_model ORDER BY ts) FILTER (WHERE gpu_model IS NOT NULL) AS gpu_model,
    CAST(sum(interval_ms) AS DOUBLE) / 1000.0 AS seconds,
    count(*) AS samples,
    sum(CAST(gpu_util_pct AS DOUBLE) * interval_ms)
      / sum(CASE WHEN gpu_util_pct IS NOT NULL THEN interval_ms END) AS gpu_util_pct_mean,
    max(gpu_util_pct) AS gpu_util_pct_max,
    sum(CAST(mem_util_pct AS DOUBLE) * interval_ms)
      / sum(CASE WHEN mem_util_pct IS NOT NULL THEN interval_ms END) AS mem_util_pct_mean,
    sum(CAST(sm_active_pct AS DOUBLE) * interval_ms)
      / sum(CASE WHEN sm_active_pct IS NOT NULL THEN interval_ms END) AS sm_active_pct_mean,
    max(fb_used_bytes) AS fb_used_bytes_max,
    max(fb_total_bytes) AS fb_total_bytes,
    sum(sample_energy_j) AS energy_j,
    sum(CAST(power_mw AS DOUBLE) * interval_ms)
      / sum(CASE WHEN power_mw IS NOT NULL THEN interval_ms END) AS power_mw_mean,
    sum(CAST(pcie_tx_bytes_per_s AS DOUBLE) * interval_ms)
      / sum(CASE WHEN pcie_tx_bytes_per_s IS NOT NULL THEN interval_ms END) AS pcie_tx_bytes_per_s_mean,
    sum(CAST(pcie_rx_bytes_per_s AS DOUBLE) * interval_ms)
      / sum(CASE WHEN pcie_rx_bytes_per_s IS NOT NULL THEN interval_ms END) AS pcie_rx_bytes_per_s_mean,
    last_value(parent_gpu_uuid ORDER BY ts) FILTER (WHERE parent_gpu_uuid IS NOT NULL) AS parent_gpu_uuid,
    last_value(mig_profile ORDER BY ts) FILTER (WHERE mig_profile IS NOT NULL) AS mig_profile,
    last_value(mig_slices ORDER BY ts) FILTER (WHERE mig_slices IS NOT NULL) AS mig_slices,
    last_value(mig_total_slices ORDER BY ts) FILTER (WHERE mig_total_slices IS NOT NULL) AS mig_total_slices,
    sum(CAST(tensor_active_pct AS DOUBLE) * interval_ms)
      / sum(CASE WHEN tensor_active_pct IS NOT NULL THEN interval_ms END) AS tensor_active_pct_mean,
    sum(CAST(dram_active_pct AS DOUBLE) * interval_ms)
      / sum(CASE WHEN dram_active_pct IS NOT NULL THEN interval_ms END) AS dram_active_pct_mean,
    date,
    host
  FROM energy
  GROUP BY date_trunc('minute', ts), gpu_uuid, date, host
)
SELECT
  m.minute,
  m.gpu_uuid,
  CAST(m.gpu_index AS INT) AS gpu_index,
  m.gpu_model,
  m.seconds,
  CAST(m.samples AS INT) AS samples,
  m.gpu_util_pct_mean,
  CAST(m.gpu_util_pct_max AS INT) AS gpu_util_pct_max,
  m.mem_util_pct_mean,
  m.sm_active_pct_mean,
  CAST(m.fb_used_bytes_max AS BIGINT) AS fb_used_bytes_max,
  CAST(m.fb_total_bytes AS BIGINT) AS fb_total_bytes,
  m.energy_j,
  m.power_mw_mean,
  m.pcie_tx_bytes_per_s_mean,
  m.pcie_rx_bytes_per_s_mean,
  coalesce(p.proc_held, false) AS proc_held,
  CAST(coalesce(p.proc_count, 0) AS INT) AS proc_count,
  m.parent_gpu_uuid,
  m.mig_profile,
  CAST(m.mig_slices AS INT) AS mig_slices,
  CAST(m.mig_total_slices AS INT) AS mig_total_slices,
  m.tensor_active_pct_mean,
  m.dram_active_pct_mean,
  m.date,
  m.host
FROM minutes m
LEFT JOIN procs p ON p.gpu_uuid = m.gpu_uuid AND p.minute = m.minute
