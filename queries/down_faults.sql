-- down_faults: the events of a period that may take a GPU out of service,
-- in time order: what the time faults took starts from.
--
-- Answers: the rows of gpu_events from $1 up to $2 of the kinds that can
-- take a GPU down (XIDs, double-bit ECC errors, GPUs lost, the volatile
-- uncorrected ECC counter, pending row remappings and page retirements,
-- failed remappings). apron follows those that do
-- (apron_schemas::gpu_events::takes_gpu_down: an XID NVIDIA's catalogue
-- calls fatal, a counter that grew, a state set) and follows each GPU from
-- the fault to its next busy minute (the ledger's downtime; see the
-- reports docs, "Faults"); every XID, fatal or not, also goes to the
-- findings of the jobs that held the GPU then ("Jobs").
--
-- Parameters:
--   $1  period start (UTC timestamp, inclusive)
--   $2  period end (UTC timestamp, exclusive)
--
-- Output, one row per event, oldest first:
--   host, gpu_index, gpu_uuid  the GPU (or MIG instance) the driver named
--   ts          when it happened (UTC)
--   kind        xid | ecc_dbe | gpu_lost | ecc_uncorrected | remap_pending
--               | remap_failure | retired_pending
--   xid         the XID code (kind xid), else null
--   value       a counter's reading (a state: 1 set, 0 cleared), else null
--   delta       how much a counter grew since its previous reading, else null
--   detail      what the source added
SELECT host, gpu_index, gpu_uuid, ts, kind, xid, value, delta, detail
FROM gpu_events
WHERE ts >= $1 AND ts < $2
  AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  AND kind IN ('xid', 'ecc_dbe', 'gpu_lost', 'ecc_uncorrected', 'remap_pending', 'remap_failure',
               'retired_pending')
ORDER BY ts, host, gpu_uuid, kind
