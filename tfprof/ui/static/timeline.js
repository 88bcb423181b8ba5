// tfprof web UI: one step's timeline on a canvas. Each lane's bars are sorted and do not overlap,
// so a frame finds the first visible bar by bisection, draws only what is on screen and merges
// bars narrower than a pixel that touch into one box.
"use strict";

class Timeline {
  constructor(canvas, tip, { onPick } = {}) {
    this.canvas = canvas; this.tip = tip; this.data = null; this.onPick = onPick; this.query = ""; this.hits = null;
    this.LANE = 18; this.TOP = 26; this.LABEL = 230; this.COUNTER = 44; this.frames = [];
    canvas.addEventListener("wheel", (e) => { e.preventDefault(); this.zoom(e); }, { passive: false });
    canvas.addEventListener("mousedown", (e) => { this.drag = { x: e.clientX, t0: this.t0, t1: this.t1 }; });
    window.addEventListener("mouseup", (e) => {
      // a press that did not move is a click: the bar under it opens its op in the views
      if (this.drag && Math.abs(e.clientX - this.drag.x) < 3 && e.target === this.canvas) this.click(e);
      this.drag = null;
    });
    canvas.addEventListener("mousemove", (e) => this.move(e));
    canvas.addEventListener("mouseleave", () => { this.tip.style.display = "none"; });
    canvas.addEventListener("dblclick", () => this.reset());
    new ResizeObserver(() => this.draw()).observe(canvas);
  }

  set(data) {
    this.data = data;
    const n = data.lanes.length, start = new Int32Array(n + 1);
    for (let k = 0; k < data.lane.length; k++) start[data.lane[k] + 1]++;
    for (let k = 0; k < n; k++) start[k + 1] += start[k];
    this.start = start; // lane k's bars are start[k]..start[k+1] (the server sorts by lane, then ts)
    this.ts = Float64Array.from(data.ts); this.dur = Float64Array.from(data.dur);
    this.colors = data.names.map((nm) => { const t = hue(nm); return `hsl(${Math.round(t * 360)}, 52%, ${Math.round(58 + t * 14)}%)`; });
    this.hits = this.query ? data.names.map((n) => n.toLowerCase().includes(this.query)) : null;
    let end = 1;
    for (let k = 0; k < this.ts.length; k++) end = Math.max(end, this.ts[k] + this.dur[k]);
    for (const c of data.counters) for (const t of c.ts) end = Math.max(end, t);
    this.end = end;
    this.reset();
  }

  highlight(text) {
    // bars whose name contains `text` (any case) stand out, the rest fade; returns how many and
    // how long they run together
    this.query = text.toLowerCase();
    this.hits = this.query && this.data ? this.data.names.map((n) => n.toLowerCase().includes(this.query)) : null;
    this.draw();
    if (!this.hits) return null;
    let count = 0, time = 0;
    for (let k = 0; k < this.data.name.length; k++) if (this.hits[this.data.name[k]]) { count++; time += this.dur[k]; }
    return { count, time };
  }

  at(e) {
    // the bar under the pointer: [k, lane] or null
    const r = this.canvas.getBoundingClientRect(), mx = e.clientX - r.left, my = e.clientY - r.top;
    const lane = Math.floor((my - this.TOP) / this.LANE), { x0, w } = this.span();
    if (!this.data || lane < 0 || lane >= this.data.lanes.length || mx < x0) return null;
    const t = this.t0 + ((mx - x0) / w) * (this.t1 - this.t0), slack = (3 / w) * (this.t1 - this.t0);
    let k = this.first(this.start[lane], this.start[lane + 1], t - slack);
    if (k >= this.start[lane + 1] || this.ts[k] > t + slack) return null;
    // within the few pixels' slack, the bar the pointer is on wins over a neighbour's edge
    for (let j = k; j < this.start[lane + 1] && this.ts[j] <= t + slack; j++) {
      if (this.ts[j] <= t && t <= this.ts[j] + this.dur[j]) { k = j; break; }
    }
    return [k, lane, mx, my];
  }

  click(e) {
    const hit = this.at(e);
    if (hit && this.onPick) this.onPick(this.data.names[this.data.name[hit[0]]]);
  }

  reset() { this.t0 = 0; this.t1 = this.end ? this.end * 1.02 : 1; this.draw(); }

  span() { return { x0: this.LABEL, w: Math.max(1, this.canvas.clientWidth - this.LABEL - 8) }; }

  zoom(e) {
    if (!this.data) return;
    const r = this.canvas.getBoundingClientRect(), { x0, w } = this.span();
    const f = Math.min(1, Math.max(0, (e.clientX - r.left - x0) / w));
    const at = this.t0 + f * (this.t1 - this.t0);
    const k = Math.exp(e.deltaY * 0.0018);
    const width = Math.min(this.end * 1.5, Math.max(0.05, (this.t1 - this.t0) * k));
    this.t0 = at - f * width; this.t1 = this.t0 + width;
    this.draw();
  }

  move(e) {
    if (this.drag) {
      const { w } = this.span(), dt = ((e.clientX - this.drag.x) / w) * (this.drag.t1 - this.drag.t0);
      this.t0 = this.drag.t0 - dt; this.t1 = this.drag.t1 - dt;
      this.draw();
      return;
    }
    this.hover(e);
  }

  first(lo, hi, t) {
    // the first bar in [lo, hi) that ends at or after t (ends are sorted as the bars do not overlap)
    while (lo < hi) { const m = (lo + hi) >> 1; if (this.ts[m] + this.dur[m] < t) lo = m + 1; else hi = m; }
    return lo;
  }

  draw() {
    if (!this.data) return;
    const t0p = performance.now();
    const { ctx, w, h } = fitCanvas(this.canvas), { x0, w: span } = this.span();
    const d = this.data, scale = span / (this.t1 - this.t0), L = this.LANE, T = this.TOP;
    ctx.clearRect(0, 0, w, h);
    ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "middle";
    this.ruler(ctx, w, x0, span);
    let drawn = 0;
    for (let lane = 0; lane < d.lanes.length; lane++) {
      const y = T + lane * L;
      if (y > h) break;
      ctx.fillStyle = lane % 2 ? "#fafbfc" : "#fff"; ctx.fillRect(0, y, w, L);
      ctx.fillStyle = "#3a4252";
      ctx.fillText(this.short(d.lanes[lane].label), 8, y + L / 2, this.LABEL - 14);
      ctx.save(); ctx.beginPath(); ctx.rect(x0, y, span, L); ctx.clip();
      const hi = this.start[lane + 1];
      let k = this.first(this.start[lane], hi, this.t0);
      let runX = -1, runEnd = -1, runColor = null;
      for (; k < hi; k++) {
        const ts = this.ts[k];
        if (ts > this.t1) break;
        const a = x0 + (ts - this.t0) * scale, b = a + this.dur[k] * scale;
        if (b - a < 1 && runColor !== null && a <= runEnd + 1) { runEnd = Math.max(runEnd, b); continue; }
        if (runColor !== null) { ctx.fillStyle = runColor; ctx.fillRect(runX, y + 2, Math.max(1, runEnd - runX), L - 4); drawn++; }
        runX = a; runEnd = b; runColor = this.hits ? (this.hits[d.name[k]] ? "#c2185b" : "#e3e6ec") : this.colors[d.name[k]];
        if (b - a >= 1) {
          ctx.fillStyle = runColor; ctx.fillRect(a, y + 2, Math.max(1, b - a - 0.5), L - 4); drawn++;
          if (b - a > 48) { ctx.fillStyle = "#17202e"; ctx.fillText(this.short(d.names[d.name[k]]), Math.max(a, x0) + 3, y + L / 2, b - Math.max(a, x0) - 6); }
          runColor = null;
        }
      }
      if (runColor !== null) { ctx.fillStyle = runColor; ctx.fillRect(runX, y + 2, Math.max(1, runEnd - runX), L - 4); drawn++; }
      ctx.restore();
    }
    this.counters(ctx, w, h, x0, span, scale);
    const ms = performance.now() - t0p;
    this.frames.push(ms); if (this.frames.length > 200) this.frames.shift();
    this.lastDrawn = drawn;
  }

  ruler(ctx, w, x0, span) {
    ctx.fillStyle = "#f5f6f9"; ctx.fillRect(0, 0, w, this.TOP - 2);
    const width = this.t1 - this.t0, raw = width / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
    ctx.fillStyle = "#6b7383"; ctx.strokeStyle = "#e3e6ec";
    for (let t = Math.ceil(this.t0 / step) * step; t <= this.t1; t += step) {
      const x = x0 + ((t - this.t0) / width) * span;
      ctx.beginPath(); ctx.moveTo(x, this.TOP - 8); ctx.lineTo(x, this.canvas.clientHeight); ctx.stroke();
      ctx.fillText(Fmt.time(t).replace(/\.00(?=[a-z])/, ""), x + 3, 10);
    }
    ctx.fillText(`step ${this.data.step}`, 8, 10);
  }

  counters(ctx, w, h, x0, span, scale) {
    let y = this.TOP + this.data.lanes.length * this.LANE + 8;
    for (const c of this.data.counters) {
      if (y > h) break;
      let top = 1;
      for (const b of c.bytes) top = Math.max(top, b);
      ctx.fillStyle = "#3a4252"; ctx.fillText(this.short(c.label), 8, y + 10, this.LABEL - 14);
      ctx.fillStyle = "#6b7383"; ctx.fillText(`max ${Fmt.memory(top)}`, 8, y + 26);
      ctx.save(); ctx.beginPath(); ctx.rect(x0, y, span, this.COUNTER); ctx.clip();
      ctx.fillStyle = "rgba(47, 111, 222, .28)"; ctx.strokeStyle = "#2f6fde";
      ctx.beginPath(); ctx.moveTo(x0, y + this.COUNTER);
      let last = y + this.COUNTER;
      for (let k = 0; k < c.ts.length; k++) {
        const x = x0 + (c.ts[k] - this.t0) * scale, v = y + this.COUNTER - (c.bytes[k] / top) * (this.COUNTER - 4);
        ctx.lineTo(x, last); ctx.lineTo(x, v); last = v;
      }
      ctx.lineTo(x0 + span, last); ctx.lineTo(x0 + span, y + this.COUNTER); ctx.closePath(); ctx.fill();
      ctx.restore();
      y += this.COUNTER + 8;
    }
  }

  short(s) { return s.length > 60 ? "…" + s.slice(-58) : s; }

  hover(e) {
    const hit = this.at(e);
    if (!hit) { this.tip.style.display = "none"; return; }
    const [k, lane, mx, my] = hit, d = this.data;
    this.tip.replaceChildren(el("b", null, d.names[d.name[k]]), el("br"),
      document.createTextNode(`start ${Fmt.time(this.ts[k])} · duration ${Fmt.time(this.dur[k])}`), el("br"),
      document.createTextNode(d.lanes[lane].label));
    this.tip.style.display = "block";
    this.tip.style.left = `${Math.min(mx + 14, this.canvas.clientWidth - 320)}px`; this.tip.style.top = `${my + 14}px`;
  }
}

window.Timeline = Timeline;
