-- Each node's own numbers for step -1, per member (a run, or one rank of a job): what
-- tfprof.queries.indexes.means.step_numbers computes for one profile, over many at once
-- (docs/TFPROF_BEHAVIOUR.md, 'Steps and averaging').
--
-- * A node's records are its node_steps rows; run_count and the byte metrics are their sums
--   divided (integer division) by the records, 0 for a node without any.
-- * Times are the sums of its executions' durations (all, accelerator, cpu), divided the same
--   way; in ns (duration_ns, else the µs times 1000) for a member whose execs hold ns, which
--   `ticks` says (1000 ticks per µs, else 1). Such a member of more than one step divides
--   every node's sums by its number of steps instead: the time per step of the capture.
-- * float_ops and macs are the static counts (a negative float_ops counts 0) times the node's
--   run_count where it ran; float_ops counted per execution (node_steps.float_ops) are summed
--   and divided by the records instead.
-- Inputs: _nodes(member, node_id, params, float_ops), _node_steps(member, node_id, run_count,
-- float_ops), _execs(member, node_id, kind, duration_micros, duration_ns), _memory(member,
-- node_id, requested_bytes, peak_bytes, residual_bytes, output_bytes), _node_flops(member,
-- node_id, macs), _steps(member, step).
WITH ran AS (
    SELECT member, node_id, COUNT(*) AS records, SUM(run_count) AS run_count,
           SUM(float_ops) AS flops, COUNT(float_ops) AS flops_counted
    FROM _node_steps
    GROUP BY member, node_id
),
scales AS (
    SELECT e.member,
           CASE WHEN COUNT(e.duration_ns) > 0 THEN 1000 ELSE 1 END AS ticks
    FROM _execs e
    GROUP BY e.member
),
captures AS (
    SELECT member, COUNT(*) AS steps FROM _steps GROUP BY member
),
durations AS (
    SELECT e.member, e.node_id, e.kind,
           CASE WHEN s.ticks = 1 THEN e.duration_micros
                ELSE COALESCE(e.duration_ns, e.duration_micros * 1000) END AS d
    FROM _execs e
    JOIN scales s ON s.member = e.member
),
times AS (
    SELECT member, node_id,
           SUM(d) AS exec_micros,
           SUM(CASE WHEN kind = 'accelerator' THEN d ELSE 0 END) AS accelerator_exec_micros,
           SUM(CASE WHEN kind = 'cpu' THEN d ELSE 0 END) AS cpu_exec_micros
    FROM durations
    GROUP BY member, node_id
),
bytes AS (
    SELECT member, node_id,
           SUM(requested_bytes) AS requested_bytes, SUM(peak_bytes) AS peak_bytes,
           SUM(residual_bytes) AS residual_bytes, SUM(output_bytes) AS output_bytes
    FROM _memory
    GROUP BY member, node_id
),
counts AS (
    SELECT n.member, n.node_id, n.params,
           CASE WHEN n.float_ops > 0 THEN n.float_ops ELSE 0 END AS static_flops,
           COALESCE(f.macs, 0) AS static_macs,
           COALESCE(r.records, 0) AS records,
           CASE WHEN r.records > 0 THEN r.run_count // r.records ELSE 0 END AS run_count,
           CASE WHEN r.flops_counted > 0 THEN r.flops // r.records END AS flops_per_run,
           COALESCE(s.ticks, 1) AS ticks,
           CASE WHEN s.ticks > 1 AND c.steps > 1 THEN c.steps ELSE 0 END AS per_capture
    FROM _nodes n
    LEFT JOIN ran r ON r.member = n.member AND r.node_id = n.node_id
    LEFT JOIN _node_flops f ON f.member = n.member AND f.node_id = n.node_id
    LEFT JOIN scales s ON s.member = n.member
    LEFT JOIN captures c ON c.member = n.member
)
SELECT
    -- the member and its node
    k.member,
    k.node_id,
    -- ticks per µs of its times: 1000 (ns) or 1 (whole µs)
    k.ticks,
    k.params,
    COALESCE(k.flops_per_run,
             CASE WHEN k.records > 0 THEN k.static_flops * k.run_count ELSE k.static_flops END) AS float_ops,
    k.run_count,
    CASE WHEN k.per_capture > 0 THEN COALESCE(t.exec_micros, 0) // k.per_capture
         WHEN k.records > 0 THEN COALESCE(t.exec_micros, 0) // k.records ELSE 0 END AS exec_micros,
    CASE WHEN k.per_capture > 0 THEN COALESCE(t.accelerator_exec_micros, 0) // k.per_capture
         WHEN k.records > 0 THEN COALESCE(t.accelerator_exec_micros, 0) // k.records ELSE 0 END
        AS accelerator_exec_micros,
    CASE WHEN k.per_capture > 0 THEN COALESCE(t.cpu_exec_micros, 0) // k.per_capture
         WHEN k.records > 0 THEN COALESCE(t.cpu_exec_micros, 0) // k.records ELSE 0 END AS cpu_exec_micros,
    CASE WHEN k.records > 0 THEN COALESCE(b.requested_bytes, 0) // k.records ELSE 0 END AS requested_bytes,
    CASE WHEN k.records > 0 THEN COALESCE(b.peak_bytes, 0) // k.records ELSE 0 END AS peak_bytes,
    CASE WHEN k.records > 0 THEN COALESCE(b.residual_bytes, 0) // k.records ELSE 0 END AS residual_bytes,
    CASE WHEN k.records > 0 THEN COALESCE(b.output_bytes, 0) // k.records ELSE 0 END AS output_bytes,
    CASE WHEN k.records > 0 THEN k.static_macs * k.run_count ELSE k.static_macs END AS macs
FROM counts k
LEFT JOIN times t ON t.member = k.member AND t.node_id = k.node_id
LEFT JOIN bytes b ON b.member = k.member AND b.node_id = k.node_id
