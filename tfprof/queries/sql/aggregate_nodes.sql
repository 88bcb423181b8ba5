-- Members (runs, or a job's ranks) as one profile's nodes (tfprof.catalog.aggregate): a node is
-- matched across members by its name, the k-th node of a name in one member with the k-th of
-- that name in another (node-id order; a null name counts as ''), and each of its numbers for
-- step -1 (step_means.sql) is aggregated over the members: $how 'sum', 'mean' (the sum
-- integer-divided by $members, a member without the node counting 0) or 'max'. Times are first
-- brought to the finest ticks of all members (a member in whole µs times 1000 beside one in ns).
-- A union node's id follows the first member that has it (members in order, then its node ids).
-- Inputs: _means(member, node_id, ticks, params, float_ops, macs, run_count, the three times
-- and the four byte metrics) (step_means.sql), _names(member, node_id, name).
WITH keyed AS (
    SELECT m.*, COALESCE(n.name, '') AS name,
           ROW_NUMBER() OVER (PARTITION BY m.member, COALESCE(n.name, '') ORDER BY m.node_id) AS dup
    FROM _means m
    JOIN _names n ON n.member = m.member AND n.node_id = m.node_id
),
finest AS (
    SELECT MAX(ticks) AS ticks FROM _means
),
scaled AS (
    SELECT k.member, k.node_id, k.name, k.dup, k.params, k.float_ops, k.macs, k.run_count,
           k.exec_micros * (f.ticks // k.ticks) AS exec_micros,
           k.accelerator_exec_micros * (f.ticks // k.ticks) AS accelerator_exec_micros,
           k.cpu_exec_micros * (f.ticks // k.ticks) AS cpu_exec_micros,
           k.requested_bytes, k.peak_bytes, k.residual_bytes, k.output_bytes, f.ticks
    FROM keyed k
    CROSS JOIN finest f
),
firsts AS (
    SELECT name, dup, member, node_id,
           ROW_NUMBER() OVER (PARTITION BY name, dup ORDER BY member) AS nth
    FROM scaled
),
ids AS (
    SELECT name, dup, member, node_id, ROW_NUMBER() OVER (ORDER BY member, node_id) - 1 AS id
    FROM firsts
    WHERE nth = 1
)
SELECT
    -- the union node
    i.id,
    i.name,
    -- which node of that name it is in each member (1: the first in node-id order)
    i.dup,
    -- where its structure (op, op types, shapes) comes from: the first member that has it
    i.member AS first_member,
    i.node_id AS first_node,
    -- ticks per µs of its times: the finest of all members' (the same on every row)
    MAX(s.ticks) AS ticks,
    CASE WHEN $how = 'max' THEN MAX(s.params) WHEN $how = 'mean' THEN SUM(s.params) // $members
         ELSE SUM(s.params) END AS params,
    CASE WHEN $how = 'max' THEN MAX(s.float_ops) WHEN $how = 'mean' THEN SUM(s.float_ops) // $members
         ELSE SUM(s.float_ops) END AS float_ops,
    CASE WHEN $how = 'max' THEN MAX(s.macs) WHEN $how = 'mean' THEN SUM(s.macs) // $members
         ELSE SUM(s.macs) END AS macs,
    CASE WHEN $how = 'max' THEN MAX(s.run_count) WHEN $how = 'mean' THEN SUM(s.run_count) // $members
         ELSE SUM(s.run_count) END AS run_count,
    CASE WHEN $how = 'max' THEN MAX(s.exec_micros) WHEN $how = 'mean' THEN SUM(s.exec_micros) // $members
         ELSE SUM(s.exec_micros) END AS exec_micros,
    CASE WHEN $how = 'max' THEN MAX(s.accelerator_exec_micros)
         WHEN $how = 'mean' THEN SUM(s.accelerator_exec_micros) // $members
         ELSE SUM(s.accelerator_exec_micros) END AS accelerator_exec_micros,
    CASE WHEN $how = 'max' THEN MAX(s.cpu_exec_micros) WHEN $how = 'mean' THEN SUM(s.cpu_exec_micros) // $members
         ELSE SUM(s.cpu_exec_micros) END AS cpu_exec_micros,
    CASE WHEN $how = 'max' THEN MAX(s.requested_bytes) WHEN $how = 'mean' THEN SUM(s.requested_bytes) // $members
         ELSE SUM(s.requested_bytes) END AS requested_bytes,
    CASE WHEN $how = 'max' THEN MAX(s.peak_bytes) WHEN $how = 'mean' THEN SUM(s.peak_bytes) // $members
         ELSE SUM(s.peak_bytes) END AS peak_bytes,
    CASE WHEN $how = 'max' THEN MAX(s.residual_bytes) WHEN $how = 'mean' THEN SUM(s.residual_bytes) // $members
         ELSE SUM(s.residual_bytes) END AS residual_bytes,
    CASE WHEN $how = 'max' THEN MAX(s.output_bytes) WHEN $how = 'mean' THEN SUM(s.output_bytes) // $members
         ELSE SUM(s.output_bytes) END AS output_bytes
FROM scaled s
JOIN ids i ON i.name = s.name AND i.dup = s.dup
GROUP BY i.id, i.name, i.dup, i.member, i.node_id
