-- Pre-order keys of a forest: a node's key is its parent's key followed by its sibling number
-- written in $width digits, so that sorting the keys lists the forest in pre-order (a node
-- before its subtree, siblings in `sib` order), and a node's subtree is the keys starting with
-- its key. Input: _tree(id, parent, sib), parent NULL at the top; every sib < 10^$width.
WITH RECURSIVE walk(id, key, level) AS (
    SELECT id, lpad(CAST(sib AS VARCHAR), $width, '0'), 1
    FROM _tree
    WHERE parent IS NULL
    UNION ALL
    SELECT t.id, w.key || lpad(CAST(t.sib AS VARCHAR), $width, '0'), w.level + 1
    FROM _tree t
    JOIN walk w ON t.parent = w.id
)
SELECT
    -- the node
    id,
    -- its pre-order key
    key,
    -- 1 at the top, its parent's level + 1 below
    level
FROM walk
