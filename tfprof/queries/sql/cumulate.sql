-- Running totals of a list from the bottom up: a row's total is its value plus the values of
-- every row after it (the op view's cumulative column). Input: _values(name, pos, metric, value).
SELECT
    -- the row
    name,
    -- the metric's column name
    metric,
    -- the row's value plus those of the rows below it
    SUM(value) OVER (PARTITION BY metric ORDER BY pos ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS total
FROM _values
