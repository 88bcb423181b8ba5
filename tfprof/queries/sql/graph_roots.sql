-- The graph view's roots: nodes no node consumes, keyed by their place in name order (ties by
-- id), in $width digits. Inputs: _nodes(node_id, name), _edges (graph_edges.sql).
SELECT
    -- a root
    id,
    -- its walk key (graph_relax.sql)
    lpad(CAST(sib AS VARCHAR), $width, '0') AS key
FROM (
    SELECT n.node_id AS id, ROW_NUMBER() OVER (ORDER BY n.name, n.node_id) AS sib
    FROM _nodes n
    WHERE NOT EXISTS (SELECT 1 FROM _edges e WHERE e.producer = n.node_id)
) roots
