-- newest_sample: when one host was last sampled, for `apron pick`'s error
-- when the host has no samples in its window.
--
-- Answers: the time of the newest gpu_samples row of host $1, whatever its
-- age; no row when the data holds none of that host.
--
-- Parameters:
--   $1  host name (Utf8)
--
-- Output, one row:
--   newest  time of the host's newest sample (text, as DataFusion prints a
--           UTC timestamp: 2026-11-02T08:00:00Z); NULL when it has none
SELECT CAST(max(ts) AS VARCHAR) AS newest
FROM gpu_samples
WHERE host = $1
