-- Ad-hoc case (c): the ten users holding the most GPU memory over the month,
-- from proc_samples: bytes × interval summed (GiB-hours).
-- Output: user, mem_gib_hours (GiB·h), ten rows, largest first.
SELECT "user", sum(CAST(used_mem_bytes AS DOUBLE) * interval_ms) / (3.6e6 * 1073741824) AS mem_gib_hours
FROM proc_samples
WHERE date >= DATE '2026-10-01' AND date < DATE '2026-11-01'
GROUP BY "user"
ORDER BY mem_gib_hours DESC
LIMIT 10
