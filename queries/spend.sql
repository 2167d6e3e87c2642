-- spend: what each team's GPU time cost in a period, busy, idle and unknown.
--
-- Answers: per team (from the config's rules), the GPU-hours its processes
-- held (their share of each minute), and those of minutes no process ran
-- in that the cluster had allocated to its pods and Slurm jobs, split into
-- busy, idle-held, idle-empty and unknown (no activity known: neither busy
-- nor idle), the energy, and the cost, split likewise: busy + idle +
-- unknown = cost. "(unallocated)" carries the minutes nobody held and
-- every idle-empty minute; "unassigned" the processes no team rule claims. The rows add up
-- to the fleet: sum(cost) is the cost of every recorded GPU-minute of the
-- period. apron rounds money to the cent so that the printed rows still
-- add up to the printed total.
--
-- Reads cost_buckets: minute_costs (queries/minute_costs.sql) summed per
-- bucket of the chart's length (at most an hour), GPU, state and owner,
-- which apron computes for the period and the config (analyze/src/ledger/mod.rs);
-- any sum over minute_costs at a bucket or coarser reads the same there.
-- Under `apron sql`, cost_buckets is per minute.
--
-- Parameters: none (the period and the prices are cost_buckets').
--
-- Output, one row per team, highest cost first:
--   team                  team name, "unassigned" or "(unallocated)"
--   gpu_hours             GPU-hours attributed to it (h)
--   busy_gpu_hours        of which busy (h)
--   idle_held_gpu_hours   of which idle while it held memory (h)
--   idle_empty_gpu_hours  of which idle with nothing on the GPU (h; "(unallocated)" only)
--   unknown_gpu_hours     of which with no activity known (h)
--   energy_kwh            energy of its share (kWh, before PUE)
--   cost                  its cost (currency)
--   busy_cost             cost of its busy share (currency)
--   idle_cost             cost of its idle share (currency)
--   unknown_cost          cost of its share with no activity known (currency)
--   share_pct             its cost as a share of the fleet's (%)
SELECT
  team,
  sum(seconds) / 3600.0 AS gpu_hours,
  coalesce(sum(seconds) FILTER (WHERE state = 'busy'), 0) / 3600.0 AS busy_gpu_hours,
  coalesce(sum(seconds) FILTER (WHERE state = 'idle_held'), 0) / 3600.0 AS idle_held_gpu_hours,
  coalesce(sum(seconds) FILTER (WHERE state = 'idle_empty'), 0) / 3600.0 AS idle_empty_gpu_hours,
  coalesce(sum(seconds) FILTER (WHERE state = 'unknown'), 0) / 3600.0 AS unknown_gpu_hours,
  sum(energy_j) / 3600000.0 AS energy_kwh,
  sum(cost) AS cost,
  coalesce(sum(cost) FILTER (WHERE state = 'busy'), 0) AS busy_cost,
  coalesce(sum(cost) FILTER (WHERE state IN ('idle_held', 'idle_empty')), 0) AS idle_cost,
  coalesce(sum(cost) FILTER (WHERE state = 'unknown'), 0) AS unknown_cost,
  100.0 * sum(cost) / sum(sum(cost)) OVER () AS share_pct
FROM cost_buckets
GROUP BY team
ORDER BY cost DESC, team
