-- The graph view's edges: a consumer's inputs that are graph nodes, each producer
-- once at the first input slot it feeds. Inputs: _nodes(node_id, name),
-- _inputs(node_id, input_idx, input_id).
SELECT
    -- the consuming node (the parent in the graph view)
    i.node_id AS consumer,
    -- the node it consumes (a child)
    i.input_id AS producer,
    -- the first input slot the producer feeds
    MIN(i.input_idx) AS slot
FROM _inputs i
JOIN _nodes c ON c.node_id = i.node_id
JOIN _nodes p ON p.node_id = i.input_id
GROUP BY i.node_id, i.input_id
