-- Sibling order of the printed tree: children of one printed parent by the order_by column
-- (descending; 0 throughout when the order is by name or by layout), then by name when the
-- order is by name ('' throughout otherwise), then in the forest's pre-order (`key`): sorts are
-- stable in tfprof. Input: _shown(id, dparent, sort_metric, sort_name, key).
SELECT
    -- the printed node
    id,
    -- its printed parent, NULL under the root
    dparent AS parent,
    -- its place among its printed siblings, from 1
    ROW_NUMBER() OVER (PARTITION BY dparent ORDER BY sort_metric DESC, sort_name, key) AS sib
FROM _shown
