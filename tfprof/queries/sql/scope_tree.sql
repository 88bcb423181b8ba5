-- The scope tree: every node name, and every prefix of a name before one of its `/`,
-- is a tree node; a prefix that no node is named is a synthetic parent. A name's parent is the
-- text before its last `/` (so `a//b` hangs under `a/`, which hangs under `a`). Siblings go in
-- name order (bytewise); of equal names, the one with the lowest node id takes the children.
-- Input: _names(node_id, name).
-- (`prefixes` starts from each parent once but may repeat a grandparent, UNION ALL being
-- what Spark can recurse with; `entries` takes each synthetic parent once.)
WITH RECURSIVE prefixes(name) AS (
    SELECT DISTINCT regexp_extract(name, '(?s)^(.*)/', 1) FROM _names WHERE name LIKE '%/%'
    UNION ALL
    SELECT regexp_extract(name, '(?s)^(.*)/', 1) FROM prefixes WHERE name LIKE '%/%'
),
entries AS (
    SELECT node_id, name FROM _names
    UNION ALL
    SELECT DISTINCT NULL AS node_id, p.name FROM prefixes p
    WHERE NOT EXISTS (SELECT 1 FROM _names n WHERE n.name = p.name)
),
numbered AS (
    SELECT
        ROW_NUMBER() OVER (ORDER BY name, node_id) AS id,
        node_id,
        name,
        CASE WHEN name LIKE '%/%' THEN regexp_extract(name, '(?s)^(.*)/', 1) END AS parent_name
    FROM entries
),
owners AS (
    SELECT name, MIN(id) AS id FROM numbered GROUP BY name
)
SELECT
    -- the tree node: its rank in name order
    n.id,
    -- the graph node it is, NULL for a synthetic parent
    n.node_id,
    -- the name (scope) it prints
    n.name,
    -- the parent tree node, NULL at the top
    o.id AS parent,
    -- its place among its siblings (name order)
    n.id AS sib
FROM numbered n
LEFT JOIN owners o ON o.name = n.parent_name
