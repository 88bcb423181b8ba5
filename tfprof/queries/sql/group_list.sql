-- The part of a list of groups that prints (the op view): from the start row (the
-- first matching start_name_regexes; the top with $start_top) down, at most $max_depth + 1
-- rows, stopping before the first row from the start on whose name matches
-- trim_name_regexes. Input: _rows(name, pos, start_hit, trim_hit), pos from 0 in list order.
WITH first AS (
    SELECT
        CASE WHEN $start_top THEN 0
             ELSE COALESCE(MIN(CASE WHEN start_hit THEN pos END), COUNT(*)) END AS start_pos,
        COUNT(*) AS n
    FROM _rows
),
stop AS (
    SELECT COALESCE(MIN(r.pos), MIN(f.n)) AS stop_pos
    FROM first f
    LEFT JOIN _rows r ON r.trim_hit AND r.pos >= f.start_pos
)
SELECT
    -- the group
    r.name,
    -- its place in the list
    r.pos,
    -- rows below the start (the start is 0)
    r.pos - f.start_pos AS depth
FROM _rows r
CROSS JOIN first f
CROSS JOIN stop s
WHERE r.pos >= f.start_pos AND r.pos < LEAST(f.start_pos + $max_depth + 1, s.stop_pos)
