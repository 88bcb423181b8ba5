// tfprof web UI: the page's state (profile, view, options), its tabs and what each tab loads.
"use strict";

const $ = (id) => document.getElementById(id);
// the option panel's select fields, order_by values and thresholds: the server's registries
// (/api/profiles `options`), a metric registered there included
let SELECT = [], ORDER = [], MINS = [];
const REGEXES = ["account_type_regexes", "start_name_regexes", "trim_name_regexes", "show_name_regexes", "hide_name_regexes"];
// the command line's defaults: only options that differ are sent (and shown in the command)
// reverse (ours): the page's two-way sort, siblings in the opposite of tfprof's order (1)
const DEFAULTS = { max_depth: 10, step: -1, order_by: "name", reverse: 0, select: "micros", account_displayed_op_only: false,
  account_type_regexes: ".*", start_name_regexes: ".*", trim_name_regexes: "", show_name_regexes: ".*", hide_name_regexes: "" };

const state = { profiles: [], views: [], pid: "0", cmd: "scope", opts: { ...DEFAULTS }, tab: "overview", metric: "micros", loaded: {} };

function showError(e) { const b = $("error"); b.textContent = e ? String(e.message || e) : ""; b.classList.toggle("on", !!e); }

function query() {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(state.opts)) if (String(v) !== String(DEFAULTS[k])) q.set(k, String(v));
  return q.toString();
}

function base(pid = state.pid) { return { pid, cmd: state.cmd, query: query() }; }

function buildPanel() {
  const sel = $("select");
  for (const f of SELECT) {
    const l = el("label"), c = el("input");
    c.type = "checkbox"; c.value = f; c.name = "select";
    l.append(c, document.createTextNode(" " + f.replace("_micros", " time").replace(/_/g, " ")));
    sel.appendChild(l);
  }
  const order = document.querySelector("select[name=order_by]");
  for (const o of ORDER) order.appendChild(new Option(o, o));
  for (const m of MINS) {
    const l = el("label", null, m.replace("min_", "").replace("_micros", " time (us)").replace("_bytes", " bytes").replace(/_/g, " ") + " ≥");
    const i = el("input"); i.type = "number"; i.min = 0; i.name = m;
    l.appendChild(i); $("mins").appendChild(l);
  }
  $("options").addEventListener("change", () => { readPanel(); refresh(); });
  $("options").addEventListener("submit", (e) => { e.preventDefault(); readPanel(); refresh(); });
  $("reset").addEventListener("click", () => {
    state.opts = { ...DEFAULTS, ...viewDefaults(state.cmd) }; state.byView = {}; fillPanel(); refresh();
  });
}

function fillPanel() {
  const f = $("options");
  for (const c of f.querySelectorAll("input[name=select]")) c.checked = state.opts.select.split(",").includes(c.value);
  for (const k of ["order_by", "max_depth", ...REGEXES, ...MINS]) f.elements[k].value = state.opts[k];
  f.elements.account_displayed_op_only.checked = !!state.opts.account_displayed_op_only;
  const step = f.elements.step, prof = current();
  step.replaceChildren(new Option("mean of steps (-1)", "-1"), ...prof.steps.map((s) => new Option(`step ${s}`, s)));
  step.value = String(state.opts.step);
}

function readPanel() {
  const f = $("options"), o = state.opts;
  o.select = [...f.querySelectorAll("input[name=select]:checked")].map((c) => c.value).join(",");
  for (const k of ["order_by", ...REGEXES]) o[k] = f.elements[k].value;
  for (const k of ["max_depth", "step", ...MINS]) o[k] = f.elements[k].value === "" ? DEFAULTS[k] : Number(f.elements[k].value);
  o.account_displayed_op_only = f.elements.account_displayed_op_only.checked;
}

function current() { return state.profiles.find((p) => p.id === state.pid); }

function showTab(tab) {
  state.tab = tab;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("on", b.dataset.tab === tab);
  for (const s of document.querySelectorAll(".tab")) s.classList.toggle("on", s.id === `tab-${tab}`);
  $("panel").classList.toggle("hidden", !["tree", "flame", "compare"].includes(tab));
}

function setTab(tab) { showTab(tab); refresh(); }

function refresh() {
  // one at a time, in order: a refresh asked for while one runs starts when it ends
  state.pending = (state.pending || Promise.resolve()).then(doRefresh);
  return state.pending;
}

async function doRefresh() {
  showError(null);
  const key = `${state.pid}|${state.cmd}|${query()}|${state.metric}`;
  try {
    if (state.tab === "overview" && state.loaded.overview !== state.pid) { await loadOverview(); state.loaded.overview = state.pid; }
    if (state.tab === "tree" && state.loaded.tree !== key) { await loadTree(); state.loaded.tree = key; }
    if (state.tab === "flame" && state.loaded.flame !== key) { await ui.flame.load(base(), state.metric); state.loaded.flame = key; }
    if (state.tab === "timeline" && state.loaded.timeline !== state.pid) { await loadTimeline(); state.loaded.timeline = state.pid; }
    if (state.tab === "advisor" && state.loaded.advisor !== state.pid) { await loadAdvice(); state.loaded.advisor = state.pid; }
    if (state.tab === "steps" && state.loaded.steps !== state.pid) { await loadSteps(); state.loaded.steps = state.pid; }
    if (state.tab === "ranks" && !state.loaded.ranks) { await loadRanks(openRank); state.loaded.ranks = true; }
    if (state.tab === "memory" && state.loaded.memory !== state.pid + (state.memoryPick || "")) {
      await loadMemory(); state.loaded.memory = state.pid + (state.memoryPick || "");
    }
    if (state.tab === "compare") {
      const a = $("cmp-a").value, b = $("cmp-b").value, steps = compareSteps(a, b);
      const ckey = `${key}|${a}|${b}|${steps}|${state.cmpMode}`;
      if (state.loaded.compare !== ckey) {
        const both = [ui.left.load(a, state.cmd, compareQuery(steps && steps[0])), ui.right.load(b, state.cmd, compareQuery(steps && steps[1]))];
        await Promise.all([...(state.cmpMode === "trees" ? both : []), loadChanges(a, b, steps)]);
        state.loaded.compare = ckey;
      }
    }
  } catch (e) { showError(e); }
}

async function loadTree() {
  const view = await ui.tree.load(state.pid, state.cmd, query());
  $("command").querySelector("code").textContent = view.command + (view.reverse ? "   # the page shows it the other way round" : "");
  $("line").textContent = "";
  $("hits").classList.remove("on");
}

async function search(text) {
  const hits = $("hits");
  if (!text) { hits.classList.remove("on"); return; }
  try {
    const found = await getJSON(ui.tree.url("search", `q=${encodeURIComponent(text)}`));
    const items = found.rows.map((r, k) => {
      const d = el("div", "hit");
      d.appendChild(nameEl("span", null, r.name));
      if (r.kernel) d.appendChild(nameEl("span", "kernel", `launched ${r.kernel}`));  // found by a kernel's name
      d.addEventListener("click", () => ui.tree.reveal(r.i, found.hits[k].path));
      return d;
    });
    if (!items.length) items.push(el("div", "more", `no node name, nor kernel its node launched, contains “${text}” in this view`));
    else if (found.total > found.rows.length) items.push(el("div", "more", `${found.total - found.rows.length} more matches`));
    hits.replaceChildren(...items); hits.classList.add("on");
    const best = Math.max(0, found.rows.findIndex((r) => r.name === text)); // an exact name first
    if (found.rows.length) await ui.tree.reveal(found.rows[best].i, found.hits[best].path);
  } catch (e) { showError(e); }
}

// What each view starts with: the op view ranks op types by time (by name, its rows are an
// alphabet); a view's order and depth are its own, kept when another view is shown.
// a list of groups (the op view) opens on its most expensive rows, a tree in its own order
const LAYOUT_DEFAULTS = { groups: { order_by: "micros" } };
const viewDefaults = (view) => LAYOUT_DEFAULTS[(state.views.find((v) => v.name === view) || {}).layout] || {};
const VIEW_OPTIONS = ["order_by", "reverse", "max_depth"];

function switchView(view) {
  if (view === state.cmd) return;
  state.byView = state.byView || {};
  state.byView[state.cmd] = Object.fromEntries(VIEW_OPTIONS.map((k) => [k, state.opts[k]]));
  const kept = state.byView[view] || { ...Object.fromEntries(VIEW_OPTIONS.map((k) => [k, DEFAULTS[k]])), ...viewDefaults(view) };
  Object.assign(state.opts, kept);
  state.cmd = view;
  fillPanel();
  markViews();
}

async function reveal(view, name) {
  // select the node (or op type, or code path) `name` in the tree of `view`
  switchView(view);
  setTab("tree");
  await refresh();
  for (let attempt = 0; attempt < 2; attempt++) {
    const found = await getJSON(ui.tree.url("search", `q=${encodeURIComponent(name)}&limit=500`));
    const k = found.rows.findIndex((r) => r.name === name);
    if (k >= 0) { await ui.tree.reveal(found.rows[k].i, found.hits[k].path); return; }
    if (attempt || state.opts.max_depth >= 100000) break;
    state.opts.max_depth = 100000; // deeper than max_depth shows: show every level, then look again
    fillPanel();
    await refresh();
  }
  showError(`\`${name}\` is not shown in the ${view} view with these options`);
}

async function loadTimeline() {
  const prof = current(), stepSel = $("tl-step");
  if (!prof.steps.length) { showError("this profile has no steps: no timeline"); return; }
  if (!stepSel.options.length || stepSel.dataset.pid !== state.pid) {
    stepSel.replaceChildren(...prof.steps.map((s) => new Option(`step ${s}`, s)));
    stepSel.value = String(prof.steps[prof.steps.length - 1]); stepSel.dataset.pid = state.pid;
  }
  const focus = state.timelineFocus;
  if (focus && prof.steps.includes(focus.step)) stepSel.value = String(focus.step);
  const data = await getColumns(`/api/timeline/${state.pid}?step=${stepSel.value}`);
  ui.timeline.set(data);
  $("tl-info").textContent = timelineFacts(data);
  if (focus) {  // from the Memory page: the peak's moment, marked (its time since the epoch, in us)
    state.timelineFocus = null;
    ui.timeline.markAt(focus.at - (data.origin_ns !== undefined ? data.origin_ns / 1000 : data.origin), "memory peak");
  }
}

function timelineFacts(d) {
  const tracks = d.lanes.filter((l) => l.label).length, flows = d.flow_from.length;
  return `${d.ts.length.toLocaleString()} ${d.cats ? "events" : "ops"} on ${tracks} track${tracks === 1 ? "" : "s"}`
    + (d.lanes.length > tracks ? ` (${d.lanes.length} lanes)` : "") + (flows ? ` · ${flows.toLocaleString()} flows` : "");
}

function table(columns, rows, link, labels) {
  const t = el("table", "grid"), head = el("tr");
  // right-aligned: numbers, and numbers already formatted (the advisor's `1.23ms`, `46.19%`, `--`)
  const amount = (v) => v === null || typeof v === "number" || (typeof v === "string" && /^(--|-?\d[\d.,]*(us|ms|sec|B|KB|MB|GB|TB|k|M|G|T|%)?)$/.test(v));
  const numeric = columns.map((c) => rows.length > 0 && rows.every((r) => amount(r[c])));
  // a column of long names gives way to the others (app.css, td.name): its names cut in the middle
  const names = columns.map((c, j) => !numeric[j] && rows.some((r) => typeof r[c] === "string" && r[c].length > 24));
  columns.forEach((c, j) => {
    const th = el("th", numeric[j] ? "r" : null, labels ? labels[j] : c);
    th.title = c;  // the column's name in JSON and SQL
    head.appendChild(th);
  });
  const body = el("tbody");
  rows.forEach((r, k) => {
    const tr = el("tr");
    columns.forEach((c, j) => {
      const v = r[c], td = el("td", numeric[j] ? "r" : null);
      const text = v === null ? "NULL" : typeof v === "number" && !Number.isInteger(v) ? v.toPrecision(6) : typeof v === "object" ? JSON.stringify(v) : String(v);
      if (link && link[k] && v === link[k].name) {
        const a = nameEl("a", null, text); a.title = `${text}: show in the ${link[k].view} view`;
        a.addEventListener("click", () => reveal(link[k].view, link[k].name));
        td.appendChild(a); td.classList.toggle("name", names[j]);
      } else if (!numeric[j] && typeof v === "string") {  // a name: cut in the middle, its leaf kept
        td.appendChild(nameEl("span", null, text)); td.classList.toggle("name", names[j]);
      } else td.textContent = text;
      td.title = text;
      tr.appendChild(td);
    });
    body.appendChild(tr);
  });
  const thead = el("thead"); thead.appendChild(head);
  t.append(thead, body);
  return t;
}

async function revealIn(table, name) {
  // select row `name` in one of Compare's trees, opening its ancestors (absent there: nothing)
  const found = await getJSON(table.url("search", `q=${encodeURIComponent(name)}&limit=500`));
  const k = found.rows.findIndex((r) => r.name === name);
  if (k >= 0) await table.reveal(found.rows[k].i, found.hits[k].path);
}

// Compare: two profiles, or two steps of one (shown when both sides name the same profile)
function compareSteps(a, b) {
  const box = $("cmp-steps"), prof = state.profiles.find((p) => p.id === a);
  const many = a === b && prof && prof.steps.length > 1;
  box.hidden = !many;
  if (!many) return null;
  for (const [sel, k] of [[$("cmp-step-a"), 0], [$("cmp-step-b"), 1]]) {
    if (sel.dataset.pid !== a) {
      sel.replaceChildren(...prof.steps.map((s) => new Option(`${s}`, s)));
      sel.value = String(prof.steps[Math.min(k, prof.steps.length - 1)]); sel.dataset.pid = a;
    }
  }
  return [$("cmp-step-a").value, $("cmp-step-b").value];
}

function compareQuery(step) {
  const q = new URLSearchParams(query());
  if (step !== null && step !== undefined) q.set("step", step);
  return q.toString();
}

// Compare's merged tree: the diff's rows in tree order (order=tree), each with A, B, Δ and Δ% of
// the first field, indented by depth; a row with rows under it folds them away on a click.
function mergedTree(d) {
  const column = d.value_columns[0], field = d.fields[0];
  const kind = column.includes("micros") ? "time" : column.includes("bytes") ? "memory" : "number";
  const fmt = (v) => (v === null || v === undefined ? "–" : Fmt.value(kind, Math.abs(v)));
  const t = el("table", "grid"), head = el("tr"), body = el("tbody");
  for (const [c, r] of [["node name", 0], ["status", 0], [`${field} A`, 1], [`${field} B`, 1], ["Δ", 1], ["Δ%", 1]]) head.appendChild(el("th", r ? "r" : null, c));
  const rows = [];
  d.rows.forEach((row, k) => {
    const v = row.values[column], tr = el("tr");
    const name = el("td", "nm", row.name.split("/").pop() || row.name);
    name.style.paddingLeft = `${10 + row.depth * 16}px`; name.title = row.path;
    const pct = v.delta_pct === null ? "new" : `${v.delta_pct > 0 ? "+" : ""}${v.delta_pct.toFixed(1)}%`;
    tr.append(name, el("td", null, row.status), el("td", "r", fmt(v.a)), el("td", "r", fmt(v.b)),
      el("td", `r ${v.delta > 0 ? "up" : v.delta < 0 ? "down" : ""}`, `${v.delta > 0 ? "+" : v.delta < 0 ? "−" : ""}${fmt(v.delta)}`),
      el("td", "r", pct));
    const next = d.rows[k + 1];
    if (next && next.depth > row.depth) {
      tr.classList.add("open");
      tr.addEventListener("click", () => {
        const open = tr.classList.toggle("open"); tr.classList.toggle("closed", !open);
        // fold (or unfold) every row below it, down to the next one at its depth
        for (let j = k + 1; j < rows.length && d.rows[j].depth > row.depth; j++) {
          rows[j].hidden = !open ? true : !visibleUnder(j, k);
        }
      });
    }
    rows.push(tr); body.appendChild(tr);
  });
  function visibleUnder(j, top) {
    // a row shows when every ancestor between it and `top` is open
    let depth = d.rows[j].depth;
    for (let i = j - 1; i > top; i--) if (d.rows[i].depth < depth) { if (rows[i].classList.contains("closed")) return false; depth = d.rows[i].depth; }
    return true;
  }
  const thead = el("thead"); thead.appendChild(head); t.append(thead, body);
  const note = el("div", "bar");
  note.append(el("b", null, "Merged tree"), el("span", "muted", `${d.rows.length.toLocaleString()} of ${d.total_rows.toLocaleString()} rows in tree order; click a row to fold what is under it`));
  $("cmp-merged").replaceChildren(note, t);
}

async function loadChanges(a, b, steps) {
  // tfprof diff of the right profile against the left (or of two steps): the largest changes of
  // the first field, and in flame mode the merged tree as a differential flame graph
  const box = $("changes");
  $("cmp-trees").hidden = state.cmpMode !== "trees"; $("cmp-flame-box").hidden = state.cmpMode !== "flame";
  $("cmp-merged").hidden = state.cmpMode !== "merged";
  if (a === b && !steps) { box.replaceChildren(el("div", "muted", "Pick two different profiles, or a profile with several steps and two of its steps, to see what changed.")); return; }
  const extra = steps ? `&against=${steps[1]}` : "";
  if (state.cmpMode !== "trees") {
    const tree = await getJSON(`/api/diff/${a}/${b}/${state.cmd}`, `${compareQuery(steps && steps[0])}&order=tree&limit=2000${extra}`);
    if (state.cmpMode === "flame") ui.diffFlame.set(tree); else mergedTree(tree);
  }
  const d = await getJSON(`/api/diff/${a}/${b}/${state.cmd}`, `${compareQuery(steps && steps[0])}&limit=12${extra}`);
  // the field the rows are ordered by (the diff's: time when selected), shown and named in the caption
  const field = d.order.field, column = d.value_columns[d.fields.indexOf(field)];
  const kind = column.includes("micros") ? "time" : column.includes("bytes") ? "memory" : "number";
  const fmt = (v) => (v === null || v === undefined ? "–" : Fmt.value(kind, Math.abs(v)));
  const t = el("table", "grid"), head = el("tr");
  for (const [c, r] of [["", 0], ["node name", 0], ["status", 0], [`${field} A`, 1], [`${field} B`, 1], ["Δ", 1], ["Δ%", 1]]) head.appendChild(el("th", r ? "r" : null, c));
  const body = el("tbody");
  for (const row of d.rows) {
    const v = row.values[column], tr = el("tr", row.significant ? "sig" : null);
    const mark = el("td", "mark", row.significant ? "*" : "");
    mark.title = row.significant ? "outside the noise band (Welch's t-test, α = 0.001)" : "";
    const pct = v.delta_pct === null ? "new" : `${v.delta_pct > 0 ? "+" : ""}${v.delta_pct.toFixed(1)}%`;
    const name = el("td", "name"), link = nameEl("a", null, row.name);
    link.title = `${row.path}: select it in both trees`;
    link.addEventListener("click", () => Promise.all([revealIn(ui.left, row.name), revealIn(ui.right, row.name)]).catch(showError));
    name.appendChild(link);
    tr.append(mark, name, el("td", null, row.status), el("td", "r", fmt(v.a)), el("td", "r", fmt(v.b)),
      el("td", `r ${v.delta > 0 ? "up" : v.delta < 0 ? "down" : ""}`, `${v.delta > 0 ? "+" : v.delta < 0 ? "−" : ""}${fmt(v.delta)}`),
      el("td", "r", pct));
    tr.children[1].title = row.path;
    body.appendChild(tr);
  }
  const thead = el("thead"); thead.appendChild(head); t.append(thead, body);
  const caption = el("div", "bar");
  caption.append(el("b", null, "Largest changes"), el("span", "muted",
    `${d.rows.length} of ${d.total_rows.toLocaleString()} rows, by |Δ| of ${field}` + (d.a.steps > 1 && d.b.steps > 1 && d.rows.some((r) => r.values[column].noise !== undefined) ? "; * = significant" : "")),
  el("code", "cmdline", d.command));
  box.replaceChildren(caption, t);
}

// The landing page: the profile's facts, the op types that take the time (each opens the op
// view), each step's time, and the advisor's findings (loaded after the rest has painted).
async function loadOverview() {
  const pid = state.pid;
  const o = await getJSON(`/api/overview/${pid}`);
  const link = (text, go) => { const a = el("a", null, text); a.addEventListener("click", go); const d = el("div", "more"); d.appendChild(a); return d; };
  const facts = el("div", "card");
  facts.appendChild(el("h3", null, `At a glance`));
  const grid = el("div", "facts");
  const fact = (value, label) => { const d = el("div"); d.append(el("b", null, value), el("span", null, label)); grid.appendChild(d); };
  fact(o.source, "source");
  if (o.step_count) fact(Fmt.time(o.step_window_ns / 1000), o.step_count === 1 ? "the step" : `median of ${o.step_count} steps`);
  fact(Fmt.time(o.total_micros), "op time per step, summed over threads and devices");
  for (const [k, v] of Object.entries(o.facts)) fact(typeof v === "number" ? v.toLocaleString() : String(v), k);
  facts.appendChild(grid);

  const ops = el("div", "card");
  ops.appendChild(el("h3", null, "Where the time goes: op types by execution time"));
  const most = Math.max(...o.top_ops.map((r) => r.micros), 0) || 1;
  for (const r of o.top_ops) {
    const row = el("div", "oprow");
    const bar = el("div", "bar"); bar.style.width = `${(100 * r.micros) / most}%`;
    const nm = nameEl("span", "nm", r.name); nm.title = `${r.name}: ${r.count} node${r.count === 1 ? "" : "s"}`;
    row.append(nm, bar, el("span", "val", Fmt.time(r.micros)), el("span", "val", `${(100 * r.share).toFixed(1)}%`));
    row.dataset.op = r.name;
    row.addEventListener("click", () => openOp());
    ops.appendChild(row);
  }
  if (!o.top_ops.length) ops.appendChild(el("div", "none", "No op ran."));
  ops.appendChild(link("Open the op view →", () => openOp()));

  const steps = el("div", "card");
  steps.appendChild(el("h3", null, "Steps"));
  const longest = Math.max(...o.steps.map((r) => r.window_ns), 0) || 1;
  for (const r of o.steps) {
    const row = el("div", "oprow");
    const bar = el("div", "bar"); bar.style.width = `${(100 * r.window_ns) / longest}%`; bar.style.background = "#3a8fd6";
    const busy = r.utilization === null ? "" : `${(100 * r.utilization).toFixed(0)}% busy`;
    row.append(el("span", "nm", `step ${r.step}${r.device !== null ? ` · gpu:${r.device}` : ""}`), bar,
      el("span", "val", Fmt.time(r.window_ns / 1000)), el("span", "val", busy));
    row.addEventListener("click", () => setTab("steps"));
    steps.appendChild(row);
  }
  steps.appendChild(link("Where each step's time goes →", () => setTab("steps")));

  const findings = el("div", "card");
  findings.appendChild(el("h3", null, "Advisor"));
  const waiting = el("div", "none", "Checking…");
  findings.appendChild(waiting);
  $("overview").replaceChildren(facts, ops, steps, findings);
  // the advisor takes longest: it fills its card when done, while the page stays usable
  state.extra = getJSON(`/api/advice/${pid}`).then((advice) => {
    const said = advice.checkers.filter((c) => c.reports.length);
    waiting.remove();
    for (const c of said) {
      const f = el("div", "finding");
      f.append(el("b", null, `${c.name}: `), document.createTextNode(c.reports[0]));
      findings.appendChild(f);
    }
    if (!said.length) findings.appendChild(el("div", "none", "No findings."));
    findings.appendChild(link("All of the advisor's evidence →", () => setTab("advisor")));
  }).catch((e) => { waiting.textContent = String(e.message || e); });
}

function openOp() {
  const op = state.views.find((v) => v.layout === "groups");
  if (op) { switchView(op.name); setTab("tree"); }
}

async function loadAdvice() {
  const advice = await getJSON(`/api/advice/${state.pid}`);
  const cards = advice.checkers.map((c) => {
    const card = el("div", "card"), h = el("h3", null, c.name);
    h.appendChild(el("small", null, c.reports.length ? `${c.reports.length} report${c.reports.length > 1 ? "s" : ""}` : "nothing to report"));
    card.appendChild(h);
    if (c.reports.length) card.appendChild(el("div", "reports", c.reports.join("\n")));
    if (c.rows.length) card.appendChild(table(c.columns, c.rows, c.links, c.labels));
    else if (!c.reports.length) card.appendChild(el("div", "none", "No findings."));
    return card;
  });
  for (const n of advice.notes) cards.push(el("div", "notes", n));
  $("advice").replaceChildren(...cards);
}

// Each step's time per GPU (tfprof steps): a bar split into its parts, then the report's table.
async function loadSteps() {
  const answer = await getJSON(`/api/steps/${state.pid}`);
  const card = el("div", "card");
  card.appendChild(el("h3", null, "Where each step's time goes"));
  const gpu = answer.rows.filter((r) => r.device !== null);
  if (gpu.length) {
    card.appendChild(partsLegend(PARTS));
    const longest = Math.max(...gpu.map((r) => r.window_ns));
    for (const r of gpu) {
      const row = el("div", "steprow");
      row.appendChild(el("span", "steplabel", `step ${r.step} · gpu:${r.device} · ${Fmt.time(r.window_ns / 1000)}`));
      row.appendChild(partsBar(r, r.window_ns, longest, PARTS));
      card.appendChild(row);
    }
  }
  card.appendChild(el("div", "reports", answer.text));
  $("steps").replaceChildren(card);
}

// Memory in use over one step on one allocator (tfprof memory): the curve with its peak, every
// allocator's steps to pick from, and the ops at the peak (each opens its node in the scope view).
async function loadMemory() {
  const q = state.memoryPick ? `?${state.memoryPick}` : "";
  const m = await getJSON(`/api/memory/${state.pid}${q}`);
  if (!m.shown) { $("memory").replaceChildren(el("div", "card none", "This profile records no allocation events: no memory over time.")); return; }
  const s = m.shown, card = el("div", "card");
  card.appendChild(el("h3", null, `Memory in use: step ${s.step} on ${s.allocator}`));
  const pick = el("div", "pick"), sel = el("select");
  sel.name = "memory-pick";
  for (const r of m.rows) {
    const o = new Option(`${r.allocator} · step ${r.step} · peak ${r.peak_bytes === null ? "?" : Fmt.memory(r.peak_bytes)}${r.damage ? " · damaged" : ""}`, `step=${r.step}&allocator=${encodeURIComponent(r.allocator)}`);
    o.selected = r.step === s.step && r.allocator === s.allocator;
    sel.appendChild(o);
  }
  sel.addEventListener("change", () => { state.memoryPick = sel.value; refresh(); });
  pick.append(el("span", null, "show"), sel);
  if (s.source === "per-node") pick.appendChild(el("small", null, "~ estimated: no allocation events; each op holds its peak bytes while it runs and its residual bytes after"));
  else if (!s.exact) pick.appendChild(el("small", null, "the trace does not record this allocator's level: a running sum of its events from the capture's first"));
  if (s.reserved_bytes) pick.appendChild(el("small", null, `reserved by the caching allocator: up to ${Fmt.memory(s.reserved_bytes)} (dashed)`));
  if (m.damage) card.appendChild(el("div", "card warn", m.damage));
  const onTimeline = el("a", "to-timeline", "the peak on the timeline →");
  onTimeline.title = `step ${s.step}'s timeline, zoomed to the moment of the peak`;
  onTimeline.addEventListener("click", () => { state.timelineFocus = { step: s.step, at: s.start_micros + s.peak_micros }; state.loaded.timeline = null; setTab("timeline"); });
  pick.appendChild(onTimeline);
  card.appendChild(pick);
  // (a level beyond 1 PiB is null: damaged, not drawn)
  if (s.peak_bytes !== null) card.appendChild(memoryChart(m.curve.filter((p) => p[1] !== null), s, s.reserved_bytes ? m.reserved_curve || [] : []));
  const ops = el("div", "card");
  ops.appendChild(el("h3", null, `Allocated when the peak came (${Fmt.memory(s.peak_bytes)}, +${Fmt.time(s.peak_micros)}), net of what each op freed by then`));
  const most = Math.max(...m.ops.map((r) => r.bytes), 0) || 1;
  for (const r of m.ops) {
    const row = el("div", "oprow"), bar = el("div", "bar");
    bar.style.width = `${(100 * r.bytes) / most}%`; bar.style.background = "#3a8fd6";
    const nm = nameEl("span", "nm", r.name);
    row.append(nm, bar, el("span", "val", Fmt.memory(r.bytes)), el("span", "val", `${r.events} ev`));
    row.addEventListener("click", () => reveal("scope", r.name).catch(showError));
    ops.appendChild(row);
  }
  if (!m.ops.length) ops.appendChild(el("div", "none", "Every op had freed as much as it allocated."));
  $("memory").replaceChildren(card, ops);
}

function memoryChart(points, s, reserved = []) {
  const NS = $("svg-ns").content.firstElementChild.namespaceURI, W = 1000, H = 240, L = 70, B = 20;  // SVG's, from the page
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`); svg.setAttribute("preserveAspectRatio", "none"); svg.classList.add("memchart");
  const tmax = Math.max(...points.map((p) => p[0]), 1), lo = Math.min(0, ...points.map((p) => p[1]));
  const hi = Math.max(...points.map((p) => p[1]), ...reserved.map((p) => p[1]), 1);
  const x = (t) => L + ((W - L - 10) * t) / tmax, y = (v) => H - B - ((H - B - 10) * (v - lo)) / (hi - lo || 1);
  let d = `M${x(0)},${y(lo)}`, prev = lo;
  for (const [t, v] of points) { d += ` L${x(t)},${y(prev)} L${x(t)},${y(v)}`; prev = v; }
  d += ` L${x(tmax)},${y(prev)} L${x(tmax)},${y(lo)} Z`;
  const path = document.createElementNS(NS, "path"); path.setAttribute("d", d); path.classList.add("line");
  if (reserved.length) {  // the caching allocator's reserved bytes: a step line behind the allocated area
    let r = `M${x(0)},${y(reserved[0][1])}`, last = reserved[0][1];
    for (const [t, v] of reserved) { r += ` L${x(Math.min(t, tmax))},${y(last)} L${x(Math.min(t, tmax))},${y(v)}`; last = v; }
    const line = document.createElementNS(NS, "path"); line.setAttribute("d", r + ` L${x(tmax)},${y(last)}`); line.classList.add("reserved");
    svg.appendChild(line);
  }
  const axis = document.createElementNS(NS, "line");
  axis.setAttribute("x1", L); axis.setAttribute("x2", W); axis.setAttribute("y1", H - B); axis.setAttribute("y2", H - B); axis.classList.add("axis");
  const label = (tx, ty, text, anchor = "start") => { const e = document.createElementNS(NS, "text"); e.setAttribute("x", tx); e.setAttribute("y", ty); e.setAttribute("text-anchor", anchor); e.textContent = text; return e; };
  const peak = document.createElementNS(NS, "circle");
  peak.setAttribute("cx", x(s.peak_micros)); peak.setAttribute("cy", y(s.peak_bytes)); peak.setAttribute("r", 4); peak.classList.add("peak");
  const tip = document.createElementNS(NS, "title"); tip.textContent = `peak ${Fmt.memory(s.peak_bytes)} at +${Fmt.time(s.peak_micros)}`; peak.appendChild(tip);
  svg.append(path, axis, peak, label(4, y(hi) + 4, Fmt.memory(hi)), label(4, y(lo), Fmt.memory(lo)),
    label(L, H - 4, "0"), label(W - 4, H - 4, `+${Fmt.time(tmax)}`, "end"),
    label(Math.min(x(s.peak_micros) + 8, W - 150), Math.max(y(s.peak_bytes) + 4, 12), `peak ${Fmt.memory(s.peak_bytes)}`));
  return svg;
}

async function runSQL() {
  const q = $("sql").value, limit = $("sql-limit").value || 1000;
  const t0 = performance.now();
  try {
    showError(null);
    const res = await getJSON(`/api/sql/${state.pid}`, { q, limit });
    $("sql-result").replaceChildren(table(res.columns, res.rows));
    $("sql-info").textContent = `${res.total.toLocaleString()} rows${res.truncated ? `, first ${res.rows.length} shown` : ""} · ${Math.round(performance.now() - t0)} ms`;
  } catch (e) { $("sql-result").replaceChildren(); $("sql-info").textContent = ""; showError(e); }
}

function markViews() { for (const b of document.querySelectorAll("#views button")) b.classList.toggle("on", b.dataset.cmd === state.cmd); }

function sortBy(order) {
  // a second click on the column the view is ordered by turns the order round
  state.opts.reverse = order === state.opts.order_by ? 1 - (state.opts.reverse || 0) : 0;
  state.opts.order_by = order; fillPanel(); refresh();
}

const ui = {};

function openRank(pid) {
  // a rank of the Ranks page: its profile, on the Timeline
  $("profile").value = pid;
  $("profile").dispatchEvent(new Event("change"));
  setTab("timeline");
}

async function init() {
  // the landing tab: the Overview, or the one the address names (`#tree`, `#timeline`, ...)
  const asked = location.hash.slice(1);
  showTab(document.querySelector(`#tabs button[data-tab="${CSS.escape(asked)}"]`) ? asked : state.tab);
  const { profiles, job, views, options } = await getJSON("/api/profiles");
  ({ select: SELECT, order_by: ORDER, thresholds: MINS } = options);
  for (const m of MINS) DEFAULTS[m] = 0;
  state.opts = { ...DEFAULTS };
  buildPanel();
  ui.tree = new TreeTable($("tree"), { onSort: sortBy, onSelect: (r) => { $("line").textContent = r.line || r.name; } });
  ui.left = new TreeTable($("cmp-left"), { onSort: sortBy });
  ui.right = new TreeTable($("cmp-right"), { onSort: sortBy });
  ui.flame = new Flame($("flame"), $("flame-tip"), $("crumbs"));
  $("flame-search").addEventListener("input", () => ui.flame.highlight($("flame-search").value.trim()));
  $("flame-invert").addEventListener("click", () => {
    ui.flame.inverted = !ui.flame.inverted; ui.flame.sandwichOf = null;
    $("flame-invert").classList.toggle("on", ui.flame.inverted);
    state.loaded.flame = null; refresh();
  });
  ui.timeline = new Timeline($("timeline"), $("tl-tip"), { onPick: (name) => reveal("scope", name).catch(showError) });
  $("tl-search").addEventListener("input", () => {
    const found = ui.timeline.highlight($("tl-search").value.trim());
    const d = ui.timeline.data;
    $("tl-info").textContent = found ? `${found.count.toLocaleString()} of ${d.ts.length.toLocaleString()} match · ${Fmt.time(found.time)} in all`
      : timelineFacts(d);
  });
  state.profiles = profiles;
  state.views = views;  // the server's registry: tfprof's four views and any registered there
  for (const v of views) { const b = el("button", null, v.name); b.dataset.cmd = v.name; b.title = v.help; $("views").appendChild(b); }
  markViews();
  document.querySelector("#tabs button[data-tab=ranks]").hidden = !job;  // one job's ranks, not any profiles opened together
  for (const s of [$("profile"), $("cmp-a"), $("cmp-b")]) s.replaceChildren(...profiles.map((p) => new Option(`${p.id}: ${p.label}`, p.id)));
  $("cmp-b").value = profiles.length > 1 ? profiles[1].id : profiles[0].id;
  const facts = () => { const p = current(); $("facts").textContent = `${p.source} · ${p.nodes.toLocaleString()} nodes · ${p.steps.length} step${p.steps.length === 1 ? "" : "s"}`; $("facts").title = p.path; };
  $("profile").addEventListener("change", () => {
    state.pid = $("profile").value;
    if (state.opts.step !== -1 && !current().steps.includes(state.opts.step)) state.opts.step = -1;
    fillPanel(); facts(); refresh();
  });
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => setTab(b.dataset.tab));
  for (const b of document.querySelectorAll("#views button")) b.addEventListener("click", () => { switchView(b.dataset.cmd); refresh(); });
  for (const b of document.querySelectorAll("#metrics button")) b.addEventListener("click", () => {
    state.metric = b.dataset.metric;
    for (const x of document.querySelectorAll("#metrics button")) x.classList.toggle("on", x === b);
    refresh();
  });
  $("expand").addEventListener("click", () => ui.tree.expandAll().catch(showError));
  $("collapse").addEventListener("click", () => ui.tree.collapseAll());
  $("search").addEventListener("keydown", (e) => { if (e.key === "Enter") search($("search").value.trim()); });
  $("copy").addEventListener("click", async () => {
    const text = $("command").querySelector("code").textContent;
    try { await navigator.clipboard.writeText(text); $("copy").textContent = "Copied"; } catch (e) { window.prompt("Copy the command:", text); }
    setTimeout(() => { $("copy").textContent = "Copy"; }, 1200);
  });
  $("tl-step").addEventListener("change", () => { state.loaded.timeline = null; refresh(); });
  $("run-sql").addEventListener("click", runSQL);
  $("sql-csv").addEventListener("click", () => { showError(null); download(`/api/sql/${state.pid}/csv`, "tfprof-query.csv", { q: $("sql").value }).catch(showError); });
  $("trace").addEventListener("click", () => {
    const step = $("tl-step").value;
    download(`/api/trace/${state.pid}?step=${step}`, `tfprof-step${step}.trace.json`).catch(showError);
  });
  $("sql").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); runSQL(); } });
  for (const s of [$("cmp-a"), $("cmp-b"), $("cmp-step-a"), $("cmp-step-b")]) s.addEventListener("change", refresh);
  ui.diffFlame = new DiffFlame($("cmp-flame"), $("cmp-tip"));
  state.cmpMode = "trees";
  for (const b of document.querySelectorAll("#cmp-mode button")) b.addEventListener("click", () => {
    state.cmpMode = b.dataset.mode;
    for (const x of document.querySelectorAll("#cmp-mode button")) x.classList.toggle("on", x === b);
    refresh();
  });
  facts(); fillPanel();
  await refresh();
  window.tfprofReady = true;
  // ms from navigation to the first frame with the tree drawn (benchmarks/bench_ui.py reads it)
  requestAnimationFrame(() => { window.tfprofFirstPaint = performance.now(); });
}

window.tfprofUI = { state, ui, reveal, refresh, setTab, idle: () => Promise.all([state.pending, state.extra]) };
init().catch(showError);
