-- alloc_minute_states: every GPU-minute of a period that the cluster had
-- allocated to a pod or a Slurm job, with who held it: the one definition
-- of an allocation's holder, user and team that gpu_minute_states (whether
-- a GPU-minute is held), minute_costs (who pays for a minute no process
-- ran in) and reclaim (what a GPU is allocated to) read.
--
-- Answers, per docs/src/definitions.md: for each GPU (or MIG instance) and
-- holder in a UTC minute, its alloc_minutes rows aggregated (a minute split
-- across two files has a row in each): the seconds the allocation was
-- recorded, the holder as shown ("pod NAMESPACE/POD" for Kubernetes, "job
-- N" for Slurm), its user as shown (the Slurm job's user; "(unknown)" for
-- a pod, which the kubelet does not name a user of) and its team by the
-- config's rules, matched as for a process: the first [[team]] in the file
-- with a rule matching its user, Kubernetes namespace (a glob, here its
-- regular expression), pod labels (every label of the rule, here a regular
-- expression over the sorted k8s_labels text) or Slurm account, else
-- "unassigned". Allocations
-- come from the cluster's own books (the kubelet's pod-resources API,
-- Slurm's job records), never from anything a process says of itself.
--
-- apron registers it as the view alloc_minute_states for the period
-- wherever a query reads it (also under `apron sql`), with the config's
-- team rules as the table apron_team_rules. Plain SQL, no apron function:
-- `apron export-sql` runs it on Spark, Trino or Athena.
--
-- Parameters:
--   $1  period start (Timestamp, UTC, inclusive)
--   $2  period end (Timestamp, UTC, exclusive)
--
-- Output, one row per (GPU, minute, holder):
--   gpu_uuid, minute         the GPU-minute (a MIG instance's UUID for an instance)
--   source                   kubernetes | slurm
--   holder                   "pod NAMESPACE/POD" or "job N"
--   k8s_namespace, k8s_pod_name, k8s_container  Kubernetes: the pod and container (null otherwise)
--   k8s_labels               Kubernetes: the pod's labels recorded (null: none)
--   slurm_job_id, slurm_account, slurm_partition  Slurm: the job (null otherwise)
--   user                     the Slurm job's user name, or "(unknown)"
--   seconds                  seconds the allocation was recorded (s)
--   team                     its team, or "unassigned"
WITH alloc_rows AS (
  SELECT
    gpu_uuid,
    minute,
    source,
    k8s_namespace,
    k8s_pod_name,
    k8s_container,
    slurm_job_id,
    max(k8s_labels) AS k8s_labels,
    max(slurm_account) AS slurm_account,
    max(slurm_partition) AS slurm_partition,
    max("user") AS user_name,
    sum(seconds) AS seconds
  FROM alloc_minutes
  WHERE minute >= $1 AND minute < $2 AND date >= CAST($1 AS DATE) AND date <= CAST($2 AS DATE)
  GROUP BY gpu_uuid, minute, source, k8s_namespace, k8s_pod_name, k8s_container, slurm_job_id
),
-- Each identity once: the rules are matched per identity, not per row.
alloc_identities AS (
  SELECT DISTINCT user_name, k8s_namespace, k8s_labels, slurm_account FROM alloc_rows
),
alloc_claims AS (
  SELECT i.user_name, i.k8s_namespace, i.k8s_labels, i.slurm_account, min(r.team_order) AS team_order
  FROM alloc_identities i
  JOIN apron_team_rules r
    ON (r.kind = 'user' AND r.value = i.user_name)
    OR (r.kind = 'k8s_namespace' AND regexp_like(i.k8s_namespace, r.regex))
    OR (r.kind = 'k8s_labels' AND regexp_like(i.k8s_labels, r.regex))
    OR (r.kind = 'slurm_account' AND r.value = i.slurm_account)
  GROUP BY i.user_name, i.k8s_namespace, i.k8s_labels, i.slurm_account
),
alloc_teams AS (
  SELECT c.user_name, c.k8s_namespace, c.k8s_labels, c.slurm_account, n.team
  FROM alloc_claims c
  JOIN (SELECT DISTINCT team_order, team FROM apron_team_rules) n ON n.team_order = c.team_order
)
SELECT
  a.gpu_uuid,
  a.minute,
  a.source,
  CASE
    WHEN a.source = 'slurm' THEN 'job ' || coalesce(a.slurm_job_id, '?')
    ELSE 'pod ' || coalesce(a.k8s_namespace, '?') || '/' || coalesce(a.k8s_pod_name, '?')
  END AS holder,
  a.k8s_namespace,
  a.k8s_pod_name,
  a.k8s_container,
  a.k8s_labels,
  a.slurm_job_id,
  a.slurm_account,
  a.slurm_partition,
  coalesce(a.user_name, '(unknown)') AS "user",
  a.seconds,
  coalesce(t.team, 'unassigned') AS team
FROM alloc_rows a
LEFT JOIN alloc_teams t
  ON (t.user_name IS NOT DISTINCT FROM a.user_name)
  AND (t.k8s_namespace IS NOT DISTINCT FROM a.k8s_namespace)
  AND (t.k8s_labels IS NOT DISTINCT FROM a.k8s_labels)
  AND (t.slurm_account IS NOT DISTINCT FROM a.slurm_account)
