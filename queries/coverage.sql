-- coverage: what the data holds in a period, for the header every report
-- prints.
--
-- Answers: the first and last recorded minute in [$1, $2), how many GPUs
-- were recorded, their recorded GPU-seconds, and the GPU models seen.
--
-- Parameters:
--   $1  period start (Timestamp, UTC, inclusive)
--   $2  period end (Timestamp, UTC, exclusive)
--
-- Output, one row:
--   first_minute      first recorded UTC minute (null: no data)
--   last_minute       last recorded UTC minute
--   gpus              distinct GPUs (gpu_uuid) recorded
--   recorded_seconds  recorded GPU-seconds (s)
--   models            the distinct gpu_model values, sorted
SELECT
  min(minute) AS first_minute,
  max(minute) AS last_minute,
  count(DISTINCT gpu_uuid) AS gpus,
  coalesce(sum(seconds), 0) AS recorded_seconds,
  array_sort(array_agg(DISTINCT gpu_model)) AS models
FROM gpu_minutes
WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  -- A MIG instance is part of its parent GPU, which is counted: GPUs and
  -- GPU-seconds are the hardware's.
  AND parent_gpu_uuid IS NULL
