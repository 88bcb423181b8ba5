-- Each placed member's path in the code view's call-stack trie: its source node's traces from
-- the outermost call in, with " (gradient)" appended for a gradient member.
-- Inputs: _members (code_members.sql), _frames(id, depth, trace) (each node's frames).
SELECT
    -- the member's place in the build order
    m.ord,
    -- the frame's place on the path, from 0
    ROW_NUMBER() OVER (PARTITION BY m.ord ORDER BY f.depth) - 1 AS depth,
    -- the trie node's label there
    CASE WHEN m.gradient THEN f.trace || ' (gradient)' ELSE f.trace END AS label
FROM _members m
JOIN _frames f ON f.id = m.src
WHERE m.ord IS NOT NULL
