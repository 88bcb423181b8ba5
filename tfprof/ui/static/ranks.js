// tfprof web UI: the Ranks page. The server's profiles seen as one distributed job's ranks
// (tfprof ranks): a bar per rank, its median step split into the time it worked and the time it
// waited in collectives (a GPU rank's into tfprof steps' parts), stragglers marked with how long
// the others wait for them; the findings; the ops whose time differs most between ranks. A
// click on a rank opens its timeline.
"use strict";

const RANK_PARTS = [["compute_ns", "compute", "#e8833a"], ["communication_ns", "communication", "#7a5cc4"],
  ["memcpy_ns", "memcpy/memset", "#3a8fd6"], ["idle_ns", "idle", "#d5d9e1"]];
const CPU_PARTS = [["_work_ns", "working", "#e8833a"], ["collective_ns", "in collectives", "#7a5cc4"]];

async function loadRanks(openRank) {
  const job = await getJSON("/api/ranks");
  if (!job.job) { $("ranks").replaceChildren(el("div", "card none", job.why)); return; }
  const gpu = job.ranks.some((r) => r.compute_ns !== null), parts = gpu ? RANK_PARTS : CPU_PARTS;
  const pid = Object.fromEntries(job.sources.map((s) => [s.rank, s.pid]));
  const card = el("div", "card"), stragglers = job.ranks.filter((r) => r.straggler).length;
  card.appendChild(el("h3", null, `${job.ranks.length} ranks · median step of each, ${stragglers ? `${stragglers} straggler${stragglers > 1 ? "s" : ""}` : "no straggler"}`));
  const legend = el("div", "legend");
  for (const [, label, colour] of parts) { const key = el("span", "key"); key.style.background = colour; legend.append(key, document.createTextNode(` ${label}  `)); }
  legend.appendChild(document.createTextNode("· late: how much later than the median rank it joins the collectives · click a rank: its timeline"));
  card.appendChild(legend);
  const longest = Math.max(...job.ranks.map((r) => r.window_ns));
  for (const r of [...job.ranks].sort((a, b) => a.rank - b.rank)) {
    const row = el("div", "steprow rankrow" + (r.straggler ? " straggler" : ""));
    const late = r.late_ns === null ? "" : ` · late ${r.late_ns < 0 ? "-" : "+"}${Fmt.time(Math.abs(r.late_ns) / 1000)}`;
    row.appendChild(el("span", "steplabel", `rank ${r.rank} · ${Fmt.time(r.window_ns / 1000)}${late}${r.straggler ? " · straggler" : ""}`));
    const bar = el("div", "stepbar");
    bar.style.width = `${(100 * r.window_ns) / longest}%`;
    const values = { ...r, _work_ns: Math.max(0, r.window_ns - (r.collective_ns || 0)) };
    for (const [column, label, colour] of parts) {
      if (!values[column]) continue;
      const part = el("div", "steppart");
      part.style.width = `${(100 * values[column]) / r.window_ns}%`; part.style.background = colour;
      part.title = `${label}: ${Fmt.time(values[column] / 1000)} (${((100 * values[column]) / r.window_ns).toFixed(1)}%)`;
      bar.appendChild(part);
    }
    row.appendChild(bar);
    row.dataset.rank = r.rank;
    row.title = `rank ${r.rank}: ${job.sources.find((s) => s.rank === r.rank).path}`;
    row.addEventListener("click", () => openRank(pid[r.rank]));
    card.appendChild(row);
  }
  const found = el("div", "card");
  found.appendChild(el("h3", null, "Findings"));
  found.appendChild(job.findings.length ? el("div", "reports", job.findings.join("\n")) : el("div", "none", "nothing stands out between the ranks"));
  const ops = el("div", "card");
  ops.appendChild(el("h3", null, "Ops that differ most across ranks (cpu: self time; accelerator: the GPU work they launched)"));
  ops.appendChild(table(["name", "metric", "least", "most", "spread", "cv"], job.ops.map((o) => ({
    name: o.name, metric: o.metric, least: `${Fmt.time(o.min_ns / 1000)} (rank ${o.min_rank})`,
    most: `${Fmt.time(o.max_ns / 1000)} (rank ${o.max_rank})`, spread: Fmt.time(o.spread_ns / 1000),
    cv: o.cv === null ? "--" : o.cv.toFixed(2),
  })), null, ["op", "time", "least", "most", "spread", "cv"]));
  $("ranks").replaceChildren(card, found, ops);
}

window.loadRanks = loadRanks;
