// tfprof web UI: one step's timeline on a canvas. Each lane's bars are sorted and do not overlap,
// so a frame finds the first visible bar by bisection and draws only what is on screen. Bars
// under a pixel wide are drawn a pixel at a time: the drawer jumps (by bisection again) past
// every bar that starts within the pixel, and pixels of such bars that touch are one box, so a
// frame's work follows the screen's width, not the events' count. A foreign trace's lanes are its threads and streams, one lane per nesting level.
"use strict";

class Timeline {
  constructor(canvas, tip, { onPick } = {}) {
    this.canvas = canvas; this.tip = tip; this.data = null; this.onPick = onPick; this.query = ""; this.hits = null;
    this.LANE = 18; this.TOP = 26; this.LABEL = 230; this.COUNTER = 44; this.frames = []; this.y0 = 0; this.focus = -1;
    canvas.addEventListener("wheel", (e) => { e.preventDefault(); if (e.shiftKey) this.scroll(e.deltaY || e.deltaX); else this.zoom(e); }, { passive: false });
    canvas.addEventListener("mousedown", (e) => { this.drag = { x: e.clientX, y: e.clientY, t0: this.t0, t1: this.t1, y0: this.y0 }; });
    window.addEventListener("mouseup", (e) => {
      // a press that did not move is a click: the bar under it opens its op in the views
      if (this.drag && Math.abs(e.clientX - this.drag.x) < 3 && Math.abs(e.clientY - this.drag.y) < 3 && e.target === this.canvas) this.click(e);
      this.drag = null;
    });
    canvas.addEventListener("mousemove", (e) => this.move(e));
    canvas.addEventListener("mouseleave", () => { this.tip.style.display = "none"; this.setFocus(-1); });
    canvas.addEventListener("dblclick", () => this.reset());
    window.addEventListener("keydown", (e) => this.key(e));
    new ResizeObserver(() => this.draw()).observe(canvas);
  }

  set(data) {
    this.data = data;
    const n = data.lanes.length, start = new Int32Array(n + 1);
    for (let k = 0; k < data.lane.length; k++) start[data.lane[k] + 1]++;
    for (let k = 0; k < n; k++) start[k + 1] += start[k];
    this.start = start; // lane k's bars are start[k]..start[k+1] (the server sorts by lane, then ts)
    this.ts = data.ts; this.dur = data.dur;
    this.colors = data.names.map((nm) => { const t = hue(nm); return `hsl(${Math.round(t * 360)}, 52%, ${Math.round(58 + t * 14)}%)`; });
    // a track (thread, stream, device) is the lanes from one with a label to the next
    this.track = new Int32Array(n);
    for (let l = 0, t = -1; l < n; l++) { if (data.lanes[l].label) t = l; this.track[l] = Math.max(t, 0); }
    // the flows that start or end on bar k: flowList[flowAt[k]..flowAt[k + 1]]
    const F = data.flow_from.length, at = new Int32Array(data.ts.length + 1), list = new Int32Array(2 * F);
    for (let f = 0; f < F; f++) { at[data.flow_from[f] + 1]++; at[data.flow_to[f] + 1]++; }
    for (let k = 0; k < data.ts.length; k++) at[k + 1] += at[k];
    const fill = at.slice(0, -1);
    for (let f = 0; f < F; f++) { list[fill[data.flow_from[f]]++] = f; list[fill[data.flow_to[f]]++] = f; }
    this.flowAt = at; this.flowList = list;
    let end = 1;
    for (let k = 0; k < this.ts.length; k++) end = Math.max(end, this.ts[k] + this.dur[k]);
    for (const c of data.counters) for (const t of c.ts) end = Math.max(end, t);
    this.end = end; this.focus = -1; this.y0 = 0; this.mark = null;
    this.highlight(this.query);
    this.reset();
  }

  highlight(text) {
    // bars whose name contains `text` (any case) stand out, the rest fade; returns how many and
    // how long they run together. `seen` counts the matches up to each bar, so a pixel's box
    // of many bars knows whether it holds one.
    this.query = text.toLowerCase();
    const d = this.data;
    if (!this.query || !d) { this.hits = this.seen = null; this.draw(); return null; }
    this.hits = d.names.map((n) => n.toLowerCase().includes(this.query));
    const seen = new Int32Array(d.name.length + 1);
    let time = 0;
    for (let k = 0; k < d.name.length; k++) {
      const hit = this.hits[d.name[k]];
      seen[k + 1] = seen[k] + (hit ? 1 : 0);
      if (hit) time += this.dur[k];
    }
    this.seen = seen;
    this.draw();
    return { count: seen[d.name.length], time };
  }

  laneY(lane) { return this.TOP + lane * this.LANE - this.y0; }

  at(e) {
    // the bar under the pointer: [k, lane] or null
    const r = this.canvas.getBoundingClientRect(), mx = e.clientX - r.left, my = e.clientY - r.top;
    const lane = Math.floor((my - this.TOP + this.y0) / this.LANE), { x0, w } = this.span();
    if (!this.data || my < this.TOP || lane < 0 || lane >= this.data.lanes.length || mx < x0) return null;
    const t = this.t0 + ((mx - x0) / w) * (this.t1 - this.t0), slack = (3 / w) * (this.t1 - this.t0);
    let k = this.first(this.start[lane], this.start[lane + 1], t - slack);
    if (k >= this.start[lane + 1] || this.ts[k] > t + slack) return null;
    // within the few pixels' slack, the bar the pointer is on wins over a neighbour's edge
    for (let j = k; j < this.start[lane + 1] && this.ts[j] <= t + slack; j++) {
      if (this.ts[j] <= t && t <= this.ts[j] + this.dur[j]) { k = j; break; }
    }
    return [k, lane, mx, my];
  }

  opOf(k) {
    // the scope-view name a bar opens (a kernel's: the op that launched it), or null
    const d = this.data, n = d.node[k];
    return n >= 0 ? d.nodes[n] : null;
  }

  click(e) {
    const hit = this.at(e), op = hit && this.opOf(hit[0]);
    if (op && this.onPick) this.onPick(op);
  }

  reset() { this.t0 = 0; this.t1 = this.end ? this.end * 1.02 : 1; this.y0 = 0; this.draw(); }

  markAt(t, label) {
    // a moment of the step (us from its start) marked with a line, the view zoomed to a tenth of the step around it
    this.mark = { t, label };
    const w = Math.max(this.end / 10, 1);
    this.t0 = t - w / 2; this.t1 = t + w / 2;
    this.draw();
  }

  span() { return { x0: this.LABEL, w: Math.max(1, this.canvas.clientWidth - this.LABEL - 8) }; }

  height() {
    // the drawing's full height: the lanes, then a track per counter
    return this.TOP + this.data.lanes.length * this.LANE + this.data.counters.length * (this.COUNTER + 8) + 8;
  }

  scroll(dy) {
    if (!this.data) return;
    this.y0 = Math.max(0, Math.min(this.y0 + dy, this.height() - this.canvas.clientHeight));
    this.draw();
  }

  zoom(e) {
    if (!this.data) return;
    const r = this.canvas.getBoundingClientRect(), { x0, w } = this.span();
    const f = Math.min(1, Math.max(0, (e.clientX - r.left - x0) / w));
    const at = this.t0 + f * (this.t1 - this.t0);
    const k = Math.exp(e.deltaY * 0.0018);
    const width = Math.min(this.end * 1.5, Math.max(0.0005, (this.t1 - this.t0) * k));
    this.t0 = at - f * width; this.t1 = this.t0 + width;
    this.draw();
  }

  key(e) {
    // the keys of Perfetto and chrome://tracing: W/S zoom in and out around the middle, A/D (and
    // the left and right arrows) pan by a tenth of the view, up and down scroll the lanes, 0 fits
    // the step; not while typing in a field, nor with the timeline hidden
    if (!this.data || this.canvas.offsetParent === null || e.ctrlKey || e.metaKey || e.altKey) return;
    if (e.target && /^(INPUT|SELECT|TEXTAREA)$/.test(e.target.tagName)) return;
    const width = this.t1 - this.t0, mid = this.t0 + width / 2;
    const zoomTo = (f) => { const w = Math.min(this.end * 1.5, Math.max(0.0005, width * f)); this.t0 = mid - w / 2; this.t1 = mid + w / 2; };
    const k = e.key.length === 1 ? e.key.toLowerCase() : e.key;
    if (k === "w") zoomTo(0.8);
    else if (k === "s") zoomTo(1.25);
    else if (k === "a" || k === "ArrowLeft") { this.t0 -= width / 10; this.t1 -= width / 10; }
    else if (k === "d" || k === "ArrowRight") { this.t0 += width / 10; this.t1 += width / 10; }
    else if (k === "ArrowUp" || k === "ArrowDown") { e.preventDefault(); this.scroll((k === "ArrowUp" ? -3 : 3) * this.LANE); return; }
    else if (k === "0") { this.reset(); return; }
    else return;
    e.preventDefault();
    this.draw();
  }

  move(e) {
    if (this.drag) {
      const { w } = this.span(), dt = ((e.clientX - this.drag.x) / w) * (this.drag.t1 - this.drag.t0);
      this.t0 = this.drag.t0 - dt; this.t1 = this.drag.t1 - dt;
      this.y0 = this.drag.y0; this.scroll(this.drag.y - e.clientY);
      return;
    }
    this.hover(e);
  }

  first(lo, hi, t) {
    // the first bar in [lo, hi) that ends at or after t (ends are sorted as the bars do not overlap)
    while (lo < hi) { const m = (lo + hi) >> 1; if (this.ts[m] + this.dur[m] < t) lo = m + 1; else hi = m; }
    return lo;
  }

  after(lo, hi, t) {
    // the first bar in [lo, hi) that starts after t
    while (lo < hi) { const m = (lo + hi) >> 1; if (this.ts[m] <= t) lo = m + 1; else hi = m; }
    return lo;
  }

  color(k, j) {
    // bars k..j-1 drawn as one box: the first one's colour, or with a search, whether any matches
    if (!this.seen) return this.colors[this.data.name[k]];
    return this.seen[j] > this.seen[k] ? "#c2185b" : "#e3e6ec";
  }

  draw() {
    if (!this.data) return;
    const t0p = performance.now();
    const { ctx, w, h } = fitCanvas(this.canvas), { x0, w: span } = this.span();
    const d = this.data, scale = span / (this.t1 - this.t0), L = this.LANE;
    ctx.clearRect(0, 0, w, h);
    ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "middle";
    const charW = ctx.measureText("abcdefghij").width / 10;
    let drawn = 0;
    const first = Math.max(0, Math.floor(this.y0 / L));
    for (let lane = first; lane < d.lanes.length; lane++) {
      const y = this.laneY(lane);
      if (y > h) break;
      ctx.fillStyle = this.track[lane] % 2 ? "#f7f8fa" : "#fff"; ctx.fillRect(0, y, w, L);
      if (d.lanes[lane].label) {
        ctx.fillStyle = "#d5d9e0"; ctx.fillRect(0, y, w, 1);
        ctx.fillStyle = "#3a4252"; ctx.fillText(fit(d.lanes[lane].label, this.LABEL - 14, charW, true), 8, y + L / 2);
      }
      ctx.save(); ctx.beginPath(); ctx.rect(x0, y, span, L); ctx.clip();
      const hi = this.start[lane + 1];
      let k = this.first(this.start[lane], hi, this.t0), run = -1, runX = 0, runEnd = 0;
      const flush = (j) => { if (run >= 0) { ctx.fillStyle = this.color(run, j); ctx.fillRect(runX, y + 2, Math.max(1, runEnd - runX), L - 4); drawn++; run = -1; } };
      while (k < hi) {
        const ts = this.ts[k];
        if (ts > this.t1) break;
        const a = x0 + (ts - this.t0) * scale, b = a + this.dur[k] * scale;
        if (b - a >= 1) {
          flush(k);
          ctx.fillStyle = this.color(k, k + 1); ctx.fillRect(a, y + 2, Math.max(1, b - a - 0.5), L - 4); drawn++;
          const left = Math.max(a, x0), room = Math.min(b, x0 + span) - left - 6;
          if (room > 3 * charW) { ctx.fillStyle = "#17202e"; ctx.fillText(fit(d.names[d.name[k]], room, charW), left + 3, y + L / 2); }
          k++;
          continue;
        }
        // under a pixel: it and every bar that starts within the same pixel (the last of them
        // drawn on its own where it is wider) join the run of such boxes that touch
        let j = this.after(k + 1, hi, this.t0 + (a + 1 - x0) / scale);
        if (j - 1 > k && this.dur[j - 1] * scale >= 1) j--;
        const end = x0 + (this.ts[j - 1] + this.dur[j - 1] - this.t0) * scale;
        if (run >= 0 && a > runEnd + 1) flush(k);
        if (run < 0) { run = k; runX = a; }
        runEnd = Math.max(runEnd, end);
        k = j;
      }
      flush(k);
      ctx.restore();
    }
    this.flows(ctx, x0, span, scale);
    this.counters(ctx, w, h, x0, span, scale);
    this.ruler(ctx, w, x0, span);
    if (this.mark && this.mark.t >= this.t0 && this.mark.t <= this.t1) {
      const x = x0 + (this.mark.t - this.t0) * scale;
      ctx.fillStyle = "#c2185b"; ctx.fillRect(x - 0.5, this.TOP - 2, 1.5, h);
      ctx.fillText(this.mark.label, x + 4, this.TOP + 8);
    }
    const ms = performance.now() - t0p;
    this.frames.push(ms); if (this.frames.length > 200) this.frames.shift();
    this.lastDrawn = drawn;
  }

  flows(ctx, x0, span, scale) {
    // the arrows of the bar under the pointer (launch to kernel, forward to backward), and when
    // few flows have both ends on screen, every one of them, fainter
    const d = this.data, F = d.flow_from.length;
    if (!F) return;
    const mid = (k) => this.laneY(d.lane[k]) + this.LANE / 2, x = (k) => x0 + (this.ts[k] - this.t0) * scale;
    const arrow = (f) => {
      const a = d.flow_from[f], b = d.flow_to[f], xa = x(a), xb = x(b), ya = mid(a), yb = mid(b);
      ctx.beginPath(); ctx.moveTo(xa, ya); ctx.bezierCurveTo(xa + 20, ya, xb - 20, yb, xb, yb); ctx.stroke();
      ctx.beginPath(); ctx.moveTo(xb, yb); ctx.lineTo(xb - 6, yb - 3); ctx.lineTo(xb - 6, yb + 3); ctx.fill();
    };
    ctx.save(); ctx.beginPath(); ctx.rect(x0, this.TOP, span, this.canvas.clientHeight); ctx.clip();
    const shown = [], seen = (k) => this.ts[k] <= this.t1 && this.ts[k] + this.dur[k] >= this.t0;
    for (let f = 0; f < F && shown.length <= 300; f++) if (seen(d.flow_from[f]) && seen(d.flow_to[f])) shown.push(f);
    if (shown.length <= 300) {
      ctx.strokeStyle = "rgba(60, 70, 90, .35)"; ctx.fillStyle = ctx.strokeStyle; ctx.lineWidth = 1;
      for (const f of shown) arrow(f);
    }
    if (this.focus >= 0) {
      ctx.strokeStyle = "#17202e"; ctx.fillStyle = "#17202e"; ctx.lineWidth = 1.5;
      for (let i = this.flowAt[this.focus]; i < this.flowAt[this.focus + 1]; i++) arrow(this.flowList[i]);
    }
    ctx.restore();
  }

  ruler(ctx, w, x0, span) {
    ctx.fillStyle = "#f5f6f9"; ctx.fillRect(0, 0, w, this.TOP - 2);
    const width = this.t1 - this.t0, raw = width / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
    ctx.fillStyle = "#6b7383"; ctx.strokeStyle = "#e3e6ec"; ctx.lineWidth = 1;
    for (let t = Math.ceil(this.t0 / step) * step; t <= this.t1; t += step) {
      const x = x0 + ((t - this.t0) / width) * span;
      ctx.beginPath(); ctx.moveTo(x, this.TOP - 8); ctx.lineTo(x, this.TOP - 2); ctx.stroke();
      ctx.fillText(step < 1 ? `${t.toFixed(3)}us` : Fmt.time(t).replace(/\.00(?=[a-z])/, ""), x + 3, 10);  // under a us: to the ns
    }
    ctx.fillText(`step ${this.data.step}`, 8, 10);
  }

  counters(ctx, w, h, x0, span, scale) {
    let y = this.TOP + this.data.lanes.length * this.LANE + 8 - this.y0;
    const charW = 6;
    for (const c of this.data.counters) {
      if (y > h) break;
      if (y + this.COUNTER >= this.TOP) {
        let top = 0;
        for (const v of c.values) if (v !== null) top = Math.max(top, v);
        const scaleV = top || 1, fmt = c.unit === "bytes" ? Fmt.memory : (v) => v.toLocaleString();
        ctx.fillStyle = "#3a4252"; ctx.fillText(fit(c.label, this.LABEL - 14, charW, true), 8, y + 10);
        ctx.fillStyle = "#6b7383"; ctx.fillText(`max ${fmt(top)}`, 8, y + 26);
        ctx.save(); ctx.beginPath(); ctx.rect(x0, y, span, this.COUNTER); ctx.clip();
        ctx.fillStyle = "rgba(47, 111, 222, .28)";
        ctx.beginPath(); ctx.moveTo(x0, y + this.COUNTER);
        let last = y + this.COUNTER;
        for (let k = 0; k < c.ts.length; k++) {
          const x = x0 + (c.ts[k] - this.t0) * scale, v = y + this.COUNTER - ((c.values[k] || 0) / scaleV) * (this.COUNTER - 4);
          ctx.lineTo(x, last); ctx.lineTo(x, v); last = v;
        }
        ctx.lineTo(x0 + span, last); ctx.lineTo(x0 + span, y + this.COUNTER); ctx.closePath(); ctx.fill();
        ctx.restore();
      }
      y += this.COUNTER + 8;
    }
  }

  setFocus(k) { if (k !== this.focus) { this.focus = k; if (this.data && this.data.flow_from.length) this.draw(); } }

  hover(e) {
    const hit = this.at(e);
    if (!hit) { this.tip.style.display = "none"; this.setFocus(-1); return; }
    const [k, lane, mx, my] = hit, d = this.data, op = this.opOf(k), name = d.names[d.name[k]];
    const lines = [el("b", null, name)];
    const cat = d.cat ? d.cat[k] : -1;
    if (cat >= 0) lines.push(el("br"), document.createTextNode(d.cats[cat]));
    lines.push(el("br"), document.createTextNode(`start ${Fmt.time(this.ts[k])} · duration ${Fmt.time(this.dur[k])}`));
    lines.push(el("br"), document.createTextNode(d.lanes[this.track[lane]].label));
    if (op && op !== name) lines.push(el("br"), document.createTextNode(`op: ${op}`));
    const flows = this.flowAt[k + 1] - this.flowAt[k];
    if (flows) lines.push(el("br"), document.createTextNode(`${flows} flow${flows > 1 ? "s" : ""} (arrows)`));
    this.tip.replaceChildren(...lines);
    this.tip.style.display = "block";
    this.tip.style.left = `${Math.min(mx + 14, this.canvas.clientWidth - 320)}px`; this.tip.style.top = `${my + 14}px`;
    this.setFocus(k);
  }
}

function fit(text, width, charW, fromEnd) {
  // `text` cut to `width` pixels with an ellipsis (its end kept for names read from the right)
  const n = Math.floor(width / charW);
  if (text.length <= n) return text;
  if (n < 2) return "";
  return fromEnd ? "…" + text.slice(text.length - n + 1) : text.slice(0, n - 1) + "…";
}

window.Timeline = Timeline;
