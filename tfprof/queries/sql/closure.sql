-- The ancestor closure of a forest given by pre-order keys (path_keys.sql): one row per node
-- and each of its ancestors, itself included. A key's descendants are the keys that start
-- with it, which (keys being digits) are the keys from it up to it followed by `~`.
-- Input: _keys(id, key).
SELECT
    -- the ancestor (or the node itself)
    a.id AS anc,
    -- the node
    d.id AS id,
    -- the ancestor's key (its length orders a node's ancestors from the top)
    a.key AS anc_key
FROM _keys a
JOIN _keys d ON d.key >= a.key AND d.key < a.key || '~'
