-- ledger_gpu_minutes: the gpu_minutes rows of one day of a period, as the
-- ledger (analyze/src/ledger/mod.rs) reads them to compute every GPU-minute's
-- state and cost in one pass, a day at a time (see gpu_minute_states.sql,
-- whose definition the ledger follows and a test holds it to).
--
-- Parameters:
--   $1  slice start (Timestamp, UTC, inclusive)
--   $2  slice end (Timestamp, UTC, exclusive), within the slice's day
--   $3  the slice's day (Date, or a Timestamp at its midnight), the only date partition read
--   $4  first host read (inclusive; '' for all)
--   $5  host after the last read (exclusive; U+10FFFF for all)
--
-- Output, one row per gpu_minutes row (see gpu_minutes in docs/src/durability.md):
--   gpu_uuid, minute, host, gpu_index, gpu_model  the GPU-minute (or its part in one file)
--   seconds                                       recorded seconds (s)
--   gpu_util_pct_mean, sm_active_pct_mean         activity (%; null: unknown)
--   energy_j, power_mw_mean                       energy (J) and mean power (mW; null: unknown)
--   proc_held                                     whether a process held memory on the GPU
--   parent_gpu_uuid, mig_profile, mig_slices, mig_total_slices  MIG: an instance's parent, profile and share (null otherwise)
--   pcie_tx_bytes_per_s_mean, pcie_rx_bytes_per_s_mean  PCIe traffic (bytes/s; null: unknown), which tells
--                                                      a data-starved process from a zombie
--   fb_total_bytes                                the GPU's memory (bytes; null: unknown), for apron jobs
--   tensor_active_pct_mean, dram_active_pct_mean  GPM activity of the tensor pipes and DRAM (%; null: not
--                                                 measured), for apron jobs
SELECT
  gpu_uuid, minute, host, gpu_index, gpu_model, seconds,
  gpu_util_pct_mean, sm_active_pct_mean, energy_j, power_mw_mean, proc_held,
  parent_gpu_uuid, mig_profile, mig_slices, mig_total_slices,
  pcie_tx_bytes_per_s_mean, pcie_rx_bytes_per_s_mean, fb_total_bytes,
  tensor_active_pct_mean, dram_active_pct_mean
FROM gpu_minutes
WHERE minute >= $1 AND minute < $2 AND date = CAST($3 AS DATE) AND host >= $4 AND host < $5
