-- proc_minute_states: every process-minute of a period with who the
-- process is and whether it held memory: the one definition of a
-- process's user, team and "held" that minute_costs, zombies and reclaim
-- read.
--
-- Answers: for each process (pid, proc_start) on a GPU in a UTC minute,
-- its proc_minutes rows aggregated (a minute split across two files has a
-- row in each): its memory-time, the most memory it held, whether it held
-- memory (used_mem_bytes_max above 0 or unknown: NVML lists a process on a
-- GPU only while it has a context there, and a context is memory; the same
-- rule as the rollups' proc_held), its user as shown ("uid N" when only
-- the uid is known, "(unknown)" when neither) and its team by the config's
-- rules (apron_team).
--
-- apron registers it as the view proc_minute_states for the period wherever
-- a query reads it (also under `apron sql`), with the function
--   apron_team(user, uid, k8s_namespace, slurm_account)  the team of a process
--
-- Parameters:
--   $1  period start (Timestamp, UTC, inclusive)
--   $2  period end (Timestamp, UTC, exclusive)
--
-- Output, one row per (GPU, process, minute):
--   gpu_uuid, minute         the GPU-minute
--   pid, proc_start          the process (proc_start UTC; a reused pid is another process)
--   seconds                  seconds it was seen (s)
--   mem_time                 used memory × time (byte-seconds; 0 when unknown)
--   used_mem_bytes           most memory it held (bytes; null: unknown)
--   held                     whether it held GPU memory (above 0 or unknown)
--   comm                     its command name
--   user                     its user name, "uid N", or "(unknown)"
--   uid, k8s_namespace, slurm_account  what the team rules look at
--   team                     its team, or "unassigned"
SELECT
  gpu_uuid,
  minute,
  pid,
  proc_start,
  sum(seconds) AS seconds,
  coalesce(sum(used_mem_bytes_mean * seconds), 0.0) AS mem_time,
  max(used_mem_bytes_max) AS used_mem_bytes,
  bool_or(used_mem_bytes_max IS NULL OR used_mem_bytes_max > 0) AS held,
  max(comm) AS comm,
  coalesce(max("user"), 'uid ' || CAST(max(uid) AS VARCHAR), '(unknown)') AS "user",
  max(uid) AS uid,
  max(k8s_namespace) AS k8s_namespace,
  max(slurm_account) AS slurm_account,
  apron_team(max("user"), max(uid), max(k8s_namespace), max(slurm_account)) AS team
FROM proc_minutes
WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
GROUP BY gpu_uuid, minute, pid, proc_start
