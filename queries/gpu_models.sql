-- gpu_models: the GPU models recorded in a period and their GPU-hours, for
-- the header's list of models no [[gpu_cost]] entry of the config prices.
--
-- Answers: for each gpu_model seen in [$1, $2), how many GPUs of it were
-- recorded and for how many GPU-hours.
--
-- Parameters:
--   $1  period start (Timestamp, UTC, inclusive)
--   $2  period end (Timestamp, UTC, exclusive)
--
-- Output, one row per model, by model (an unknown model last):
--   gpu_model  the model as NVML names it (null: not recorded)
--   gpus       distinct GPUs (gpu_uuid) of the model recorded
--   gpu_hours  their recorded GPU-hours (h)
SELECT
  gpu_model,
  count(DISTINCT gpu_uuid) AS gpus,
  coalesce(sum(seconds), 0) / 3600.0 AS gpu_hours
FROM gpu_minutes
WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  -- A MIG instance is part of its parent GPU, which is counted.
  AND parent_gpu_uuid IS NULL
GROUP BY gpu_model
ORDER BY gpu_model NULLS LAST
