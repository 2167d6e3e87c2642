-- Ad-hoc case (a): per-GPU per-minute mean utilization and max power over
-- one day (2026-10-01) of the whole fleet, from gpu_samples. The per-minute
-- rows are summed up so that both engines print one row, compared between
-- them, and the time is the query's, not printing 92,160 rows.
-- Output: gpu_minutes (count), util_mean_sum (%, sum of the minutes' means),
-- power_max_mw (mW, the highest minute maximum).
SELECT count(*) AS gpu_minutes, sum(util_mean) AS util_mean_sum, max(power_max_mw) AS power_max_mw
FROM (
    SELECT gpu_uuid, date_trunc('minute', ts) AS minute,
           avg(gpu_util_pct) AS util_mean, max(power_mw) AS power_max_mw
    FROM gpu_samples
    WHERE date = DATE '2026-10-01'
    GROUP BY gpu_uuid, date_trunc('minute', ts)
) AS per_minute
