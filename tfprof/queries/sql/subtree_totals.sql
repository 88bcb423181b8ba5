-- Subtree totals: per node and metric, the sum of the values of the node and of its
-- descendants that count (all of them, or with account_displayed_op_only the displayed ones).
-- Inputs: _closure(anc, id), _values(id, metric, value) (one row per node and metric),
-- _counted(id) (the nodes that count).
SELECT
    -- the subtree's top node
    c.anc AS id,
    -- the metric's column name
    v.metric,
    -- the sum over the subtree
    SUM(v.value) AS total
FROM _closure c
JOIN _counted k ON k.id = c.id
JOIN _values v ON v.id = c.id
GROUP BY c.anc, v.metric
