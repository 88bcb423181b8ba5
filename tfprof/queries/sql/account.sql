-- tfprof's Account for the scope and code trees: a node stays when it or one of its
-- descendants is accounted (an unaccounted node shows as the ancestor of accounted ones).
-- Inputs: _closure(anc, id) (closure.sql), _accounted(id, accounted).
SELECT DISTINCT
    -- a node that stays
    c.anc AS id
FROM _closure c
JOIN _accounted a ON a.id = c.id
WHERE a.accounted
