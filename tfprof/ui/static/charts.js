// tfprof web UI: the icicle (flame graph) of the current view, on a canvas, click to zoom.
"use strict";

function hue(name) {
  // a stable colour per name: warm hues for the flame graph, spread over the whole wheel for the timeline
  let h = 2166136261;
  for (let k = 0; k < name.length; k++) { h ^= name.charCodeAt(k); h = Math.imul(h, 16777619); }
  return (h >>> 0) / 4294967296;
}

// tfprof steps' parts of a step's time, each [column, label, colour]
const PARTS = [["compute_ns", "compute", "#e8833a"], ["communication_ns", "communication", "#7a5cc4"],
  ["memcpy_ns", "memcpy/memset", "#3a8fd6"], ["idle_ns", "idle", "#d5d9e1"]];

function partsLegend(parts) {
  // a colour key per part
  const legend = el("div", "legend");
  for (const [, label, colour] of parts) {
    const key = el("span", "key"); key.style.background = colour;
    legend.append(key, document.createTextNode(` ${label}  `));
  }
  return legend;
}

function partsBar(values, total, longest, parts) {
  // a step of `total` ns as a bar as long as its share of `longest`, split into `parts` of `values`
  const bar = el("div", "stepbar");
  bar.style.width = `${(100 * total) / longest}%`;
  for (const [column, label, colour] of parts) {
    if (!values[column]) continue;
    const part = el("div", "steppart"), share = (100 * values[column]) / total;
    part.style.width = `${share}%`; part.style.background = colour;
    part.title = `${label}: ${Fmt.time(values[column] / 1000)} (${share.toFixed(1)}%)`;
    bar.appendChild(part);
  }
  return bar;
}

function fitCanvas(canvas) {
  const r = canvas.getBoundingClientRect(), dpr = window.devicePixelRatio || 1;
  const w = Math.max(1, Math.round(r.width * dpr)), h = Math.max(1, Math.round(r.height * dpr));
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return { ctx, w: r.width, h: r.height };
}

class Flame {
  constructor(canvas, tip, crumbs, { onPick } = {}) {
    this.canvas = canvas; this.tip = tip; this.crumbs = crumbs; this.onPick = onPick;
    this.H = 20; this.data = null; this.boxes = []; this.query = "";
    canvas.addEventListener("mousemove", (e) => this.hover(e));
    canvas.addEventListener("mouseleave", () => { this.tip.style.display = "none"; });
    canvas.addEventListener("click", (e) => this.click(e));
    new ResizeObserver(() => this.draw()).observe(canvas);
  }

  async load(base, metric, node = -1) {
    this.base = base; this.metric = metric;
    const { pid, cmd, query } = base;
    // a sandwich: one frame's callers and callees; bottom-up: the whole view, no zoom
    const how = this.sandwichOf ? `&sandwich=${encodeURIComponent(this.sandwichOf)}` : this.inverted ? "&inverted=1" : `&node=${node}`;
    this.data = await getJSON(`/api/flame/${pid}/${cmd}?${query}${query ? "&" : ""}metric=${metric}${how}`);
    this.draw();
    this.crumb();
    return this.data;
  }

  highlight(text) {
    // boxes whose name contains `text` (any case) stand out, the rest fade; the crumbs say how
    // much of the view they take (a match inside another match counted once)
    this.query = text.toLowerCase();
    this.draw();
    this.crumb();
  }

  matched() {
    const d = this.data, q = this.query;
    if (!d || !q) return null;
    const hits = [];
    for (let k = 0; k < d.i.length; k++) if (d.name[k].toLowerCase().includes(q)) hits.push(k);
    hits.sort((a, b) => d.level[a] - d.level[b]);
    const outer = [];
    for (const k of hits) {
      const inside = outer.some((j) => d.level[j] < d.level[k] && d.x[j] <= d.x[k] + 1e-9 && d.x[k] + d.w[k] <= d.x[j] + d.w[j] + 1e-9);
      if (!inside) outer.push(k);
    }
    return { hits: new Set(hits), total: outer.reduce((s, k) => s + d.w[k], 0) };
  }

  crumb() {
    const d = this.data, parts = [];
    const all = el("a", null, "all");
    all.addEventListener("click", () => this.load(this.base, this.metric, -1));
    parts.push(all);
    d.path.forEach((i, k) => {
      const a = el("a", null, d.path_names[k].split("/").pop() || d.path_names[k]);
      a.title = d.path_names[k];
      a.addEventListener("click", () => this.load(this.base, this.metric, i));
      parts.push(document.createTextNode(" › "), a);
    });
    if (d.root >= 0) parts.push(document.createTextNode(" › "), el("b", null, d.name[0]));
    if (d.inverted) parts.push(el("span", "muted", "   bottom-up: each frame by its own value, its callers above it (click: its sandwich);"));
    if (d.sandwich) {
      const back = el("a", null, " back to bottom-up");
      back.addEventListener("click", () => { this.sandwichOf = null; this.load(this.base, this.metric); });
      parts.push(el("span", "muted", `   sandwich of `), el("b", null, d.sandwich), el("span", "muted", ": its callers above, its callees below ·"), back);
    }
    parts.push(el("span", "muted", `   total ${Fmt.value(d.kind, d.total)}${d.dropped && !d.inverted ? ` · ${d.dropped} rows under 1/4000 of it drawn as grey runs` : ""}`));
    const found = this.matched();
    if (found) {
      parts.push(el("span", "found", ` · ${found.hits.size} match${found.hits.size === 1 ? "" : "es"}: ${Fmt.value(d.kind, found.total)}` +
        (d.total ? ` (${((100 * found.total) / d.total).toFixed(2)}%)` : "")));
    }
    this.crumbs.replaceChildren(...parts);
  }

  draw() {
    const t0 = performance.now();
    const { ctx, w, h } = fitCanvas(this.canvas);
    ctx.clearRect(0, 0, w, h);
    const d = this.data;
    this.boxes = [];
    if (!d) return;
    if (!d.total) { ctx.fillStyle = "#6b7383"; ctx.font = "13px system-ui"; ctx.fillText(`no ${d.metric} in this view`, 16, 28); return; }
    const scale = (w - 2) / d.total, H = this.H, found = this.matched();
    ctx.font = "11.5px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    for (let k = 0; k < d.i.length; k++) {
      const x = 1 + d.x[k] * scale, bw = d.w[k] * scale, y = 4 + d.level[k] * H;
      if (bw < 0.5 || y > h) continue;
      const t = hue(d.name[k]);
      ctx.globalAlpha = found && !found.hits.has(k) ? 0.25 : 1;
      ctx.fillStyle = found && found.hits.has(k) ? "#c2185b"
        : `hsl(${Math.round(8 + t * 44)}, ${Math.round(72 + t * 18)}%, ${Math.round(60 + (1 - t) * 12)}%)`;
      ctx.fillRect(x, y, Math.max(bw - 1, 0.5), H - 1);
      ctx.globalAlpha = 1;
      this.boxes.push([x, y, bw, k]);
      if (bw > 36) {
        ctx.save(); ctx.beginPath(); ctx.rect(x, y, bw - 2, H); ctx.clip();
        ctx.fillStyle = found && found.hits.has(k) ? "#ffffff" : "#2a1a0c";
        const label = d.name[k].split("/").pop() || d.name[k];
        ctx.fillText(bw > 160 ? `${label}  ${Fmt.value(d.kind, d.w[k])}` : label, x + 4, y + H / 2);
        ctx.restore();
      }
    }
    // frames too narrow to draw one by one: each run of them one grey box, so no white space is unexplained
    const small = d.small || { level: [] };
    for (let k = 0; k < small.level.length; k++) {
      const x = 1 + small.x[k] * scale, bw = small.w[k] * scale, y = 4 + small.level[k] * H;
      if (bw < 0.5 || y > h) continue;
      ctx.fillStyle = "#c9ced8";
      ctx.fillRect(x, y, Math.max(bw - 1, 0.5), H - 1);
      this.boxes.push([x, y, bw, -1 - k]);
      if (bw > 60) {
        ctx.save(); ctx.beginPath(); ctx.rect(x, y, bw - 2, H); ctx.clip();
        ctx.fillStyle = "#3a4150";
        ctx.fillText(`${small.count[k]} small`, x + 4, y + H / 2);
        ctx.restore();
      }
    }
    this.lastDraw = performance.now() - t0;
  }

  at(e) {
    const r = this.canvas.getBoundingClientRect(), mx = e.clientX - r.left, my = e.clientY - r.top;
    for (const [x, y, w, k] of this.boxes) if (mx >= x && mx < x + w && my >= y && my < y + this.H) return [k, mx, my];
    return null;
  }

  hover(e) {
    const hit = this.at(e);
    if (!hit) { this.tip.style.display = "none"; return; }
    const [k, mx, my] = hit, d = this.data;
    if (k < 0) {
      const s = d.small, j = -1 - k;
      this.tip.replaceChildren(el("b", null, `${s.count[j]} frame${s.count[j] === 1 ? "" : "s"} each under 1/4000 of the view`),
        el("br"), document.createTextNode(`${Fmt.value(d.kind, s.w[j])} together · ${((100 * s.w[j]) / d.total).toFixed(2)}% of ${d.root >= 0 ? "zoom" : "view"}; zoom into their parent to see them`));
    } else {
      this.tip.replaceChildren(el("b", null, d.name[k]), el("br"),
        document.createTextNode(`${Fmt.value(d.kind, d.w[k])} · ${((100 * d.w[k]) / d.total).toFixed(2)}% of ${d.root >= 0 ? "zoom" : "view"}`));
    }
    this.tip.style.display = "block";
    this.tip.style.left = `${Math.min(mx + 14, this.canvas.clientWidth - 300)}px`;
    this.tip.style.top = `${my + 14}px`;
  }

  click(e) {
    const hit = this.at(e);
    if (!hit) return;
    const k = hit[0], d = this.data;
    if (k < 0) return;  // a run of small frames: its parent's box zooms to them
    if (d.inverted || d.sandwich) { this.sandwichOf = d.name[k]; this.load(this.base, this.metric); return; }  // its sandwich
    const i = d.i[k];
    if (this.onPick) this.onPick(d.name[k], i);
    if (k === 0 && d.root === i) { // the zoomed box itself: one level out
      this.load(this.base, this.metric, d.path.length ? d.path[d.path.length - 1] : -1);
    } else {
      this.load(this.base, this.metric, i);
    }
  }
}

// A differential flame graph (pprof's -diff_base): the merged tree of a diff in tree order, each
// box as wide as its value in B (its subtree), red where B grew and blue where it shrank, deeper
// for larger changes; a box only in B is full red. The rows come from /api/diff?order=tree.
class DiffFlame {
  constructor(canvas, tip) {
    this.canvas = canvas; this.tip = tip; this.H = 18; this.boxes = []; this.data = null;
    canvas.addEventListener("mousemove", (e) => this.hover(e));
    canvas.addEventListener("mouseleave", () => { this.tip.style.display = "none"; });
    new ResizeObserver(() => this.draw()).observe(canvas);
  }

  set(diff) {
    // lay the rows out: a row starts where its parent's next child goes (pre-order, by depth)
    const column = diff.value_columns[0], kind = column.includes("micros") ? "time" : column.includes("bytes") ? "memory" : "number";
    const cursor = [0], rows = [];
    let total = 0;
    for (const r of diff.rows) {
      const v = r.values[column], w = v.b || 0, d = r.depth;
      const x = d === 0 ? 0 : (cursor[d] ?? 0);
      cursor[d] = x + w; cursor[d + 1] = x;
      cursor.length = d + 2;
      if (d === 0) total += w;
      if (w > 0) rows.push({ name: r.name, path: r.path, level: d, x, w, a: v.a, b: v.b, delta: v.delta, pct: v.delta_pct, status: r.status });
    }
    this.data = { rows, total, kind, field: diff.fields[0], shown: diff.rows.length, of: diff.total_rows };
    this.draw();
  }

  colour(r) {
    if (r.status === "added" || r.pct === null) return "hsl(0, 75%, 55%)";
    const t = Math.min(Math.abs(r.pct), 100) / 100;
    if (Math.abs(r.pct) < 0.05) return "hsl(220, 8%, 82%)";
    return r.delta > 0 ? `hsl(0, ${30 + 50 * t}%, ${82 - 28 * t}%)` : `hsl(215, ${30 + 50 * t}%, ${82 - 28 * t}%)`;
  }

  draw() {
    const { ctx, w, h } = fitCanvas(this.canvas);
    ctx.clearRect(0, 0, w, h);
    this.boxes = [];
    const d = this.data;
    if (!d) return;
    if (!d.total) { ctx.fillStyle = "#6b7383"; ctx.font = "13px system-ui"; ctx.fillText(`no ${d.field} in B`, 16, 28); return; }
    const scale = (w - 2) / d.total, H = this.H;
    ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "middle";
    for (let k = 0; k < d.rows.length; k++) {
      const r = d.rows[k], x = 1 + r.x * scale, bw = r.w * scale, y = 4 + r.level * H;
      if (bw < 0.5 || y > h) continue;
      ctx.fillStyle = this.colour(r);
      ctx.fillRect(x, y, Math.max(bw - 1, 0.5), H - 1);
      this.boxes.push([x, y, bw, k]);
      if (bw > 40) {
        ctx.save(); ctx.beginPath(); ctx.rect(x, y, bw - 2, H); ctx.clip();
        ctx.fillStyle = "#1d1d1f";
        ctx.fillText(r.name.split("/").pop() || r.name, x + 4, y + H / 2);
        ctx.restore();
      }
    }
  }

  hover(e) {
    const rect = this.canvas.getBoundingClientRect(), mx = e.clientX - rect.left, my = e.clientY - rect.top;
    const hit = this.boxes.find(([x, y, w]) => mx >= x && mx < x + w && my >= y && my < y + this.H);
    if (!hit) { this.tip.style.display = "none"; return; }
    const r = this.data.rows[hit[3]], f = (v) => (v === null || v === undefined ? "–" : Fmt.value(this.data.kind, Math.abs(v)));
    const pct = r.pct === null ? "new" : `${r.pct > 0 ? "+" : ""}${r.pct.toFixed(1)}%`;
    this.tip.replaceChildren(el("b", null, r.name), el("br"),
      document.createTextNode(`A ${f(r.a)} → B ${f(r.b)} · Δ ${r.delta > 0 ? "+" : r.delta < 0 ? "−" : ""}${f(r.delta)} (${pct})`));
    this.tip.style.display = "block";
    this.tip.style.left = `${Math.min(mx + 14, this.canvas.clientWidth - 320)}px`;
    this.tip.style.top = `${my + 14}px`;
  }
}

window.DiffFlame = DiffFlame;
window.Flame = Flame; window.hue = hue; window.fitCanvas = fitCanvas;
