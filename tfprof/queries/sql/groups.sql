-- Values summed per group: one row per group and metric, over the group's members.
-- Inputs: _members(id, grp) (the members that count, each with its group),
-- _values(id, metric, value) (one row per node and metric).
SELECT
    -- the group
    m.grp,
    -- the metric's column name
    v.metric,
    -- the sum over the group's members
    SUM(v.value) AS value
FROM _members m
JOIN _values v ON v.id = m.id
GROUP BY m.grp, v.metric
