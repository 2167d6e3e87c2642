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
-- rules: the first [[team]] in the file with a rule matching its user,
-- uid, Kubernetes namespace (a glob, here its regular expression) or Slurm
-- account, else "unassigned".
--
-- apron registers it as the view proc_minute_states for the period wherever
-- a query reads it (also under `apron sql`), with the config's team rules as
-- the table apron_team_rules (analyze/src/config/tables.rs; `apron
-- export-config` writes it for other engines). Plain SQL, no apron
-- function: `apron export-sql` runs it on Spark, Trino or Athena.
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
--   sm_time                  its own SM utilization × time (percent-seconds; 0 when unknown)
--   sm_known                 whether NVML gave its SM utilization in every part of the minute
--   used_mem_bytes           most memory it held (bytes; null: unknown)
--   held                     whether it held GPU memory (above 0 or unknown)
--   comm                     its command name
--   user                     its user name, "uid N", or "(unknown)"
--   uid, k8s_namespace, k8s_labels, slurm_account  what the team rules look at
--   team                     its team, or "unassigned"
WITH procs AS (
  SELECT
    gpu_uuid,
    minute,
    pid,
    proc_start,
    sum(seconds) AS seconds,
    coalesce(sum(used_mem_bytes_mean * seconds), 0.0) AS mem_time,
    coalesce(sum(sm_util_pct_mean * seconds), 0.0) AS sm_time,
    bool_and(sm_util_pct_mean IS NOT NULL) AS sm_known,
    max(used_mem_bytes_max) AS used_mem_bytes,
    bool_or(used_mem_bytes_max IS NULL OR used_mem_bytes_max > 0) AS held,
    max(comm) AS comm,
    max("user") AS user_name,
    max(uid) AS uid,
    max(k8s_namespace) AS k8s_namespace,
    max(k8s_labels) AS k8s_labels,
    max(slurm_account) AS slurm_account
  FROM proc_minutes
  WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  GROUP BY gpu_uuid, minute, pid, proc_start
),
-- Each identity once: the rules are matched per identity, not per row.
identities AS (
  SELECT DISTINCT user_name, uid, k8s_namespace, k8s_labels, slurm_account FROM procs
),
claims AS (
  SELECT i.user_name, i.uid, i.k8s_namespace, i.k8s_labels, i.slurm_account, min(r.team_order) AS team_order
  FROM identities i
  JOIN apron_team_rules r
    ON (r.kind = 'user' AND r.value = i.user_name)
    OR (r.kind = 'uid' AND r.uid = i.uid)
    OR (r.kind = 'k8s_namespace' AND regexp_like(i.k8s_namespace, r.regex))
    OR (r.kind = 'k8s_labels' AND regexp_like(i.k8s_labels, r.regex))
    OR (r.kind = 'slurm_account' AND r.value = i.slurm_account)
  GROUP BY i.user_name, i.uid, i.k8s_namespace, i.k8s_labels, i.slurm_account
),
teams AS (
  SELECT c.user_name, c.uid, c.k8s_namespace, c.k8s_labels, c.slurm_account, n.team
  FROM claims c
  JOIN (SELECT DISTINCT team_order, team FROM apron_team_rules) n ON n.team_order = c.team_order
)
SELECT
  p.gpu_uuid,
  p.minute,
  p.pid,
  p.proc_start,
  p.seconds,
  p.mem_time,
  p.sm_time,
  p.sm_known,
  p.used_mem_bytes,
  p.held,
  p.comm,
  coalesce(p.user_name, 'uid ' || CAST(p.uid AS VARCHAR), '(unknown)') AS "user",
  p.uid,
  p.k8s_namespace,
  p.k8s_labels,
  p.slurm_account,
  coalesce(t.team, 'unassigned') AS team
FROM procs p
LEFT JOIN teams t
  ON (t.user_name IS NOT DISTINCT FROM p.user_name)
  AND (t.uid IS NOT DISTINCT FROM p.uid)
  AND (t.k8s_namespace IS NOT DISTINCT FROM p.k8s_namespace)
  AND (t.k8s_labels IS NOT DISTINCT FROM p.k8s_labels)
  AND (t.slurm_account IS NOT DISTINCT FROM p.slurm_account)
