-- One round of the graph view's accounting walk as a fixed point. tfprof walks depth first
-- from the roots (in name order) along inputs (in input order), visiting each node once; the
-- path that first reaches a node is the lexicographically least of key(consumer) + slot over
-- its consumers, keys being root rank then slots in $width digits. Each round offers the
-- nodes whose key changed last round (_frontier) to their inputs, and returns the inputs whose
-- key the offer lowers; rounds go on until none does.
-- Inputs: _keys(id, key) (the keys so far), _frontier(id, key), _edges (graph_edges.sql).
WITH offers AS (
    SELECT e.producer AS id, MIN(f.key || lpad(CAST(e.slot AS VARCHAR), $width, '0')) AS key
    FROM _frontier f
    JOIN _edges e ON e.consumer = f.id
    GROUP BY e.producer
)
SELECT
    -- a node whose key this round lowered
    o.id,
    -- its new key
    o.key
FROM offers o
LEFT JOIN _keys k ON k.id = o.id
WHERE k.key IS NULL OR o.key < k.key
