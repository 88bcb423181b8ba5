-- The code view's members and the order they build its call-stack trie in (the code_trie
-- index's rule, docs/TFPROF_BEHAVIOUR.md 'Code view'). A node with code frames is a member; a
-- gradient node (its name holds `gradients/` then `_grad/`: its forward op's name lies between
-- them, or is the rest of the name when `_grad/` comes first) takes the path of the first node
-- by name that is no gradient's and is named so. Members build the trie forward nodes first,
-- by name, then gradient nodes by their forward node's name, then by their own.
-- Inputs: _nodes(id, name), _traced(id) (the nodes with code frames).
WITH ranked AS (
    SELECT
        n.id,
        n.name,
        ROW_NUMBER() OVER (ORDER BY n.name, n.id) AS name_rank,
        -- the text before the first `gradients/` and before the first `_grad/` (all of it: none)
        SPLIT_PART(n.name, 'gradients/', 1) AS before_g,
        SPLIT_PART(n.name, '_grad/', 1) AS before_s
    FROM _nodes n
    JOIN _traced t ON t.id = n.id
), named AS (
    SELECT
        id,
        name,
        name_rank,
        CASE
            WHEN LENGTH(before_g) = LENGTH(name) OR LENGTH(before_s) = LENGTH(name) THEN NULL
            WHEN LENGTH(before_s) < LENGTH(before_g) THEN SUBSTRING(name, LENGTH(before_g) + 11)
            WHEN SPLIT_PART(SUBSTRING(name, LENGTH(before_g) + 11), '_grad/', 1) <> ''
                THEN SPLIT_PART(SUBSTRING(name, LENGTH(before_g) + 11), '_grad/', 1)
        END AS forward
    FROM ranked
), forwards AS (
    SELECT name, MIN(name_rank) AS name_rank
    FROM named
    WHERE forward IS NULL
    GROUP BY name
), placed AS (
    SELECT
        n.id,
        n.forward,
        CASE WHEN n.forward IS NULL THEN n.id ELSE f.id END AS src,
        n.forward IS NOT NULL AS gradient,
        CASE WHEN n.forward IS NULL THEN n.name_rank ELSE f.name_rank END AS group_rank,
        n.name_rank
    FROM named n
    LEFT JOIN (
        SELECT w.name, w.name_rank, x.id
        FROM forwards w
        JOIN named x ON x.name_rank = w.name_rank
    ) f ON f.name = n.forward
)
SELECT
    -- the member node
    id,
    -- the node whose frames make its path (NULL: a gradient node whose forward node is missing)
    src,
    -- whether its path takes the " (gradient)" copies of the traces
    gradient,
    -- its forward op's name (gradient nodes only)
    forward,
    -- its place in the trie's build order, from 0 (NULL where src is)
    CASE WHEN src IS NOT NULL
        THEN ROW_NUMBER() OVER (ORDER BY src IS NULL, gradient, group_rank, name_rank) - 1
    END AS ord
FROM placed
