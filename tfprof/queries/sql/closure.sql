-- The ancestor closure of a forest given by pre-order keys (path_keys.sql): one row per node
-- and each of its ancestors, itself included. A node's ancestors are the nodes whose key is a
-- prefix of its key, so each node looks up its key's prefixes, cut at the lengths keys have:
-- an equality join, which every engine hashes.
-- Input: _keys(id, key).
WITH lengths AS (
    SELECT DISTINCT LENGTH(key) AS len FROM _keys
),
prefixes AS (
    SELECT d.id, SUBSTRING(d.key, 1, l.len) AS prefix
    FROM _keys d
    JOIN lengths l ON l.len <= LENGTH(d.key)
)
SELECT
    -- the ancestor (or the node itself)
    a.id AS anc,
    -- the node
    p.id AS id,
    -- the ancestor's key (its length orders a node's ancestors from the top)
    a.key AS anc_key
FROM prefixes p
JOIN _keys a ON a.key = p.prefix
