-- AcceleratorUtilizationChecker in SQL: the same rows as
-- tfprof.queries.advisor.accelerator_utilization.utilization_frame.
WITH last_step AS (
  -- each node's own highest step (tfprof uses only that record)
  SELECT node_id, max(step) AS step FROM node_steps GROUP BY node_id
),
kernels AS (
  SELECT node_id, step, sum(duration_micros) AS accelerator_exec_micros
  FROM execs WHERE kind = 'accelerator' GROUP BY node_id, step
),
per_node AS (
  SELECT CAST(n.canonical_device AS VARCHAR) AS device, s.all_start_micros, s.latest_end_micros,
         coalesce(k.accelerator_exec_micros, 0) AS accelerator_exec_micros
  FROM node_steps s
  JOIN last_step USING (node_id, step)
  JOIN nodes n USING (node_id)
  LEFT JOIN kernels k USING (node_id, step)
  WHERE contains(CAST(n.canonical_device AS VARCHAR), 'gpu')
),
per_device AS (
  SELECT device,
         coalesce(min(all_start_micros) FILTER (WHERE all_start_micros <> 0), 0) AS start_micros,
         greatest(max(latest_end_micros), 0) AS end_micros,
         sum(accelerator_exec_micros)::BIGINT AS accelerator_exec_micros
  FROM per_node GROUP BY device
)
SELECT
  -- canonical device (lower case)
  device,
  -- earliest non-zero start of the device's nodes (us since epoch; 0 if none)
  start_micros,
  -- latest end of the device's nodes (us since epoch)
  end_micros,
  -- end_micros - start_micros (us)
  end_micros - start_micros AS wall_micros,
  -- kernel time summed over the device's nodes (us)
  accelerator_exec_micros,
  -- accelerator_exec_micros / wall_micros
  accelerator_exec_micros / (end_micros - start_micros) AS utilization,
  -- ok (>= 0.5), low (0.2, 0.5), very_low (<= 0.2)
  CASE WHEN accelerator_exec_micros / (end_micros - start_micros) >= 0.5 THEN 'ok'
       WHEN accelerator_exec_micros / (end_micros - start_micros) > 0.2 THEN 'low'
       ELSE 'very_low' END AS severity
FROM per_device
WHERE end_micros - start_micros > 0
ORDER BY device
