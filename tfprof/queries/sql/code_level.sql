-- One level of the code view's call-stack trie. A trie node is a distinct path prefix; it is
-- created by the first member (in build order) whose path passes through it, and siblings are
-- ordered by their creators. A node's number is its creator's place times $levels plus its
-- depth: unique, since a path passes one node per depth. Run for $depth = 0, 1, ... in turn.
-- Inputs: _paths (code_paths.sql), _above(ord, node) (each member's node at $depth - 1; empty
-- at depth 0). Every path that reaches $depth passed $depth - 1.
SELECT
    -- the member
    p.ord,
    -- its node at this depth
    MIN(p.ord) OVER (PARTITION BY a.node, p.label) * $levels + $depth AS node,
    -- the node's parent (NULL at the top)
    a.node AS parent,
    -- the node's label
    p.label
FROM _paths p
LEFT JOIN _above a ON a.ord = p.ord
WHERE p.depth = $depth
