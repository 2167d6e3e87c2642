-- samples_between: the first and last raw sample in a short span, to give
-- a report's first and last sample to the second (the minute tables know
-- only the minute).
--
-- Parameters:
--   $1  span start (Timestamp, UTC, inclusive)
--   $2  span end (Timestamp, UTC, exclusive)
--
-- Output, one row:
--   first_ts  first gpu_samples timestamp in the span (UTC; null: none)
--   last_ts   last one
SELECT min(ts) AS first_ts, max(ts) AS last_ts
FROM gpu_samples
WHERE ts >= $1 AND ts < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
