-- budget_hours: what each team spent, hour by hour, for the budgets and
-- their month-end forecast (analyze/src/report/figures/budgets.rs).
--
-- Answers: per team and UTC hour, the cost of the team's share of the
-- hour's GPU-minutes, as spend.sql counts it ("(unallocated)" and
-- "unassigned" included: every recorded hour has rows). An hour with no
-- row for a team cost it nothing; an hour with no row at all was not
-- recorded.
--
-- Reads cost_buckets (see spend.sql): buckets of at most an hour, so an
-- hour is whole buckets.
--
-- Parameters: none (the period and the prices are cost_buckets').
--
-- Output, one row per team and hour with a row, by hour then team:
--   team   team name, "unassigned" or "(unallocated)"
--   hour   the hour's start (UTC)
--   cost   the team's cost in it (currency)
SELECT
  team,
  date_trunc('hour', minute) AS hour,
  sum(cost) AS cost
FROM cost_buckets
GROUP BY team, date_trunc('hour', minute)
ORDER BY hour, team
