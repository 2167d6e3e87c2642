-- Ad-hoc case (d): samples of one host on one day (gpu-node03, 2026-10-15),
-- a filter on both Hive partition columns. Output: samples (rows).
SELECT count(*) AS samples
FROM gpu_samples
WHERE host = 'gpu-node03' AND date = DATE '2026-10-15'
