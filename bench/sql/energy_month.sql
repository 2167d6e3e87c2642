-- Ad-hoc case (b): energy per GPU over the month, from gpu_samples: power
-- integrated over each sample's interval (mW × ms = 1e-6 J; 3.6e12 of them
-- make a kWh). Output: gpu_uuid, energy_kwh (kWh), one row per GPU.
SELECT gpu_uuid, sum(CAST(power_mw AS BIGINT) * interval_ms) / 3.6e12 AS energy_kwh
FROM gpu_samples
WHERE date >= DATE '2026-10-01' AND date < DATE '2026-11-01'
GROUP BY gpu_uuid
ORDER BY gpu_uuid
