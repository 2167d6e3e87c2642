-- idle_cost: who or what idle GPU time cost in a period, largest first.
--
-- Answers: the cost of idle GPU-minutes (busy ones left out), grouped by
-- team, user, host or GPU ($1), and beside it the hours and cost of the
-- group's minutes with no activity known (never counted as idle). By team
-- or user, an idle-held minute goes to the processes holding memory on it
-- (by memory-time share), or with none to the pods and Slurm jobs the GPU
-- was allocated to (by their seconds), and an idle-empty minute to
-- "(unallocated)"; by
-- host or GPU, every idle minute goes to its GPU.
--
-- Reads cost_buckets: minute_costs (queries/minute_costs.sql) summed per
-- bucket of the chart's length (at most an hour), GPU, state and owner,
-- which apron computes for the period and the config (analyze/src/ledger/mod.rs);
-- any sum over minute_costs at a bucket or coarser reads the same there.
-- Under `apron sql`, cost_buckets is per minute.
--
-- Parameters:
--   $1  grouping: 'team', 'user', 'host' or 'gpu'
--
-- Output, one row per group, highest idle cost first (apron names the key
-- column after the grouping: team, user, host, or gpu_uuid with host and
-- gpu_index):
--   key                   the team, user, host or gpu_uuid
--   host, gpu_index       the GPU's host and index (grouping 'gpu' only)
--   parent_gpu_uuid, mig_profile  MIG: an instance's parent GPU and profile (grouping 'gpu' only; null otherwise)
--   idle_gpu_hours        idle GPU-hours (h)
--   idle_held_gpu_hours   of which some process held memory (h)
--   idle_empty_gpu_hours  of which the GPU was empty (h)
--   idle_cost             their cost (currency)
--   unknown_gpu_hours     GPU-hours with no activity known (h; not idle)
--   unknown_cost          their cost (currency)
SELECT
  CASE $1 WHEN 'team' THEN team WHEN 'user' THEN "user" WHEN 'host' THEN host ELSE gpu_uuid END AS key,
  CASE WHEN $1 = 'gpu' THEN host END AS host,
  CASE WHEN $1 = 'gpu' THEN gpu_index END AS gpu_index,
  CASE WHEN $1 = 'gpu' THEN max(parent_gpu_uuid) END AS parent_gpu_uuid,
  CASE WHEN $1 = 'gpu' THEN max(mig_profile) END AS mig_profile,
  coalesce(sum(seconds) FILTER (WHERE state <> 'unknown'), 0) / 3600.0 AS idle_gpu_hours,
  coalesce(sum(seconds) FILTER (WHERE state = 'idle_held'), 0) / 3600.0 AS idle_held_gpu_hours,
  coalesce(sum(seconds) FILTER (WHERE state = 'idle_empty'), 0) / 3600.0 AS idle_empty_gpu_hours,
  coalesce(sum(cost) FILTER (WHERE state <> 'unknown'), 0) AS idle_cost,
  coalesce(sum(seconds) FILTER (WHERE state = 'unknown'), 0) / 3600.0 AS unknown_gpu_hours,
  coalesce(sum(cost) FILTER (WHERE state = 'unknown'), 0) AS unknown_cost
FROM cost_buckets
WHERE state <> 'busy'
GROUP BY 1, 2, 3
ORDER BY idle_cost DESC, key
