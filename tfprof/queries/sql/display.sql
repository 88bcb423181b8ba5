-- tfprof's display walk over an accounted forest (PrintScope/PrintGraph, or PrintCode with
-- $code_mode): which nodes print, at which depth, under which printed node.
--
-- * A start is a node matching start_name_regexes with no matching ancestor ($match_all,
--   tfprof's [".*"]: the top-level nodes). A start has depth 2, its descendants one more per
--   level; nodes outside the starts' subtrees never print.
-- * A node is blocked when its name matches trim_name_regexes or its depth passes $max_depth.
--   A start is visited when the root visits ($root_visits); below, a node is visited when no
--   ancestor within its start's subtree is blocked (in PrintCode, the node itself neither).
-- * A visited node prints when it passes ShouldShow (`passes`: thresholds, show and hide, worked
--   out beforehand) and its depth is within $max_depth; it hangs under its nearest printed
--   ancestor (none for a start: the root).
-- Inputs: _forest(id, start_hit, trim_hit, passes), _closure(anc, id, anc_key) (closure.sql).
WITH levels AS (
    SELECT id, COUNT(*) AS level FROM _closure GROUP BY id
),
starts AS (
    SELECT f.id
    FROM _forest f
    WHERE (f.start_hit OR $match_all)
      AND NOT EXISTS (
        SELECT 1
        FROM _closure c
        JOIN _forest a ON a.id = c.anc
        WHERE c.id = f.id AND c.anc <> f.id AND (a.start_hit OR $match_all)
      )
),
inside AS (
    SELECT c.id, 2 + lv.level - ls.level AS depth
    FROM starts s
    JOIN _closure c ON c.anc = s.id
    JOIN levels lv ON lv.id = c.id
    JOIN levels ls ON ls.id = s.id
),
blocked AS (
    SELECT i.id
    FROM inside i
    JOIN _forest f ON f.id = i.id
    WHERE f.trim_hit OR i.depth > $max_depth
),
visited AS (
    SELECT i.id, i.depth
    FROM inside i
    WHERE $root_visits
      AND NOT EXISTS (
        SELECT 1
        FROM _closure c
        JOIN blocked b ON b.id = c.anc
        WHERE c.id = i.id AND (c.anc <> i.id OR $code_mode)
      )
),
shown AS (
    SELECT v.id, v.depth
    FROM visited v
    JOIN _forest f ON f.id = v.id
    WHERE f.passes AND v.depth <= $max_depth
),
printed_ancestors AS (
    SELECT c.id, c.anc, ROW_NUMBER() OVER (PARTITION BY c.id ORDER BY c.anc_key DESC) AS nearness
    FROM _closure c
    JOIN shown a ON a.id = c.anc
    JOIN shown d ON d.id = c.id
    WHERE c.anc <> c.id
)
SELECT
    -- a printed node
    s.id,
    -- tfprof's depth (a start is 2)
    s.depth,
    -- the printed node it hangs under, NULL for the root
    p.anc AS dparent
FROM shown s
LEFT JOIN printed_ancestors p ON p.id = s.id AND p.nearness = 1
