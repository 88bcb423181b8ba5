// tfprof web UI: the Ranks page. The server's profiles seen as one distributed job's ranks
// (tfprof ranks): a bar per rank, its median step split into the time it worked and the time it
// waited in collectives (a GPU rank's into tfprof steps' parts), stragglers marked with how long
// the others wait for them; the findings; the ops whose time differs most between ranks. A
// click on a rank opens its timeline.
"use strict";

const CPU_PARTS = [["_work_ns", "working", "#e8833a"], ["collective_ns", "in collectives", "#7a5cc4"]];

async function loadRanks(openRank) {
  const job = await getJSON("/api/ranks");
  if (!job.job) { $("ranks").replaceChildren(el("div", "card none", job.why)); return; }
  const gpu = job.ranks.some((r) => r.compute_ns !== null), parts = gpu ? PARTS : CPU_PARTS;
  const pid = Object.fromEntries(job.sources.map((s) => [s.rank, s.pid]));
  const card = el("div", "card"), stragglers = job.ranks.filter((r) => r.straggler).length;
  card.appendChild(el("h3", null, `${job.ranks.length} ranks · median step of each, ${stragglers ? `${stragglers} straggler${stragglers > 1 ? "s" : ""}` : "no straggler"}`));
  const legend = partsLegend(parts);
  legend.appendChild(document.createTextNode("· late: how much later than the median rank it joins the collectives · click a rank: its timeline"));
  card.appendChild(legend);
  const longest = Math.max(...job.ranks.map((r) => r.window_ns));
  for (const r of [...job.ranks].sort((a, b) => a.rank - b.rank)) {
    const row = el("div", "steprow rankrow" + (r.straggler ? " straggler" : ""));
    const late = r.late_ns === null ? "" : ` · late ${r.late_ns < 0 ? "-" : "+"}${Fmt.time(Math.abs(r.late_ns) / 1000)}`;
    row.appendChild(el("span", "steplabel", `rank ${r.rank} · ${Fmt.time(r.window_ns / 1000)}${late}${r.straggler ? " · straggler" : ""}`));
    const values = { ...r, _work_ns: Math.max(0, r.window_ns - (r.collective_ns || 0)) };
    row.appendChild(partsBar(values, r.window_ns, longest, parts));
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
