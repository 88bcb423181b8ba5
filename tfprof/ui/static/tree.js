// tfprof web UI: number formats (tfprof's own) and the lazy tree-table of a view.
"use strict";

const Fmt = {
  // tfprof's FormatTime / FormatMemory / FormatNumber (docs/TFPROF_BEHAVIOUR.md, 'Number formats'),
  // with larger units where tfprof's stop: bytes go on to GB and TB (decimal, as tfprof's KB and
  // MB), counts take SI's k, M, G, T (tfprof's k, m, b: its `m`, a million, reads as milli).
  // A fractional time is a foreign profile's exact one: its whole us are rounded, never truncated.
  time(us) { const w = Number.isInteger(us) ? us : Math.round(us); return w < 1e3 ? `${w}us` : w < 1e6 ? `${(us / 1e3).toFixed(2)}ms` : `${(us / 1e6).toFixed(2)}sec`; },
  memory(b) { return Fmt.scaled(b, ["B", "KB", "MB", "GB", "TB"]); },
  number(n) { return Fmt.scaled(n, ["", "k", "M", "G", "T"]); },
  scaled(v, units) {
    // v under 1000 as a whole number, else two decimals of the largest unit (steps of 1000) it reaches
    const a = Math.abs(v);
    let k = 0;
    while (k < units.length - 1 && a >= 1000 ** (k + 1)) k++;
    return k ? `${(v / 1000 ** k).toFixed(2)}${units[k]}` : `${Math.trunc(v)}${units[0]}`;
  },
  ratio(r) { return Number(r).toFixed(2); },  // a ratio metric (ours): two decimals, as the report prints it
  value(kind, v) { return (Fmt[kind] || Fmt.number)(v); },
};

const LABELS = {
  exec_micros: "time", accelerator_exec_micros: "accel time", cpu_exec_micros: "cpu time",
  requested_bytes: "bytes", peak_bytes: "peak bytes", residual_bytes: "residual", output_bytes: "output bytes",
  params: "params", float_ops: "flops", run_count: "runs", definition_count: "defined",
};

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function leafAt(name) {
  // where a name's last path segment starts: after its last `/` outside <...>, (...) and [...]
  // (a kernel signature's template arguments hold slashes of their own); 0 when it has none
  let depth = 0;
  for (let k = name.length - 2; k > 0; k--) {
    const c = name[k];
    if (c === ">" || c === ")" || c === "]") depth++;
    else if ((c === "<" || c === "(" || c === "[") && depth > 0) depth--;
    else if (c === "/" && depth === 0) return k;
  }
  return 0;
}

function nameEl(tag, cls, name) {
  // `name` cut in the middle where it does not fit, its leaf (the last path segment) kept: the
  // page draws the head (ellipsised) and the leaf from data attributes (app.css, .mid); the
  // element's text is the whole name, for copying and for tests, and so is its tooltip
  const e = el(tag, cls ? `${cls} mid` : "mid"), k = leafAt(name);
  e.dataset.head = name.slice(0, k); e.dataset.leaf = name.slice(k);
  e.title = name;
  e.appendChild(el("span", "full", name));
  return e;
}

// The API answers only calls carrying the token the server wrote into this page; what a call
// asks the server to run (SQL, a diff) goes as POST with a form body.
const TOKEN = document.querySelector("meta[name=tfprof-token]").content;

async function api(url, form) {
  const init = { headers: { "X-Tfprof-Token": TOKEN } };
  if (form !== undefined) { init.method = "POST"; init.body = new URLSearchParams(form); }
  const res = await fetch(url, init);
  if (res.ok) return res;
  let body;
  try { body = await res.json(); } catch (e) { throw new Error(`${res.status} ${res.statusText}`); }
  throw new Error(body.error || `${res.status}`);
}

async function getJSON(url, form) { return (await api(url, form)).json(); }

async function getColumns(url) {
  // an answer of the server's `columns_response`: its JSON, with each array it lists as a typed
  // array over the answer's own bytes (nothing parsed or copied)
  const buf = await (await api(url)).arrayBuffer(), bytes = new Uint8Array(buf), text = new TextDecoder();
  if (text.decode(bytes.subarray(0, 4)) !== "TFCL") throw new Error(`${url}: not a columns answer`);
  const n = new DataView(buf).getUint32(4, true), data = JSON.parse(text.decode(bytes.subarray(8, 8 + n)));
  let at = 8 + n;
  for (const [name, kind, len] of data.arrays) {
    const Kind = kind === "f8" ? Float64Array : Int32Array;
    at += (8 - (at % 8)) % 8;
    data[name] = new Kind(buf, at, len); at += len * Kind.BYTES_PER_ELEMENT;
  }
  return data;
}

async function download(url, name, form) {
  // a file the API sends, saved as `name` (a link cannot carry the token)
  const blob = await (await api(url, form)).blob();
  const a = el("a"); a.href = URL.createObjectURL(blob); a.download = name;
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 60000);
}

class TreeTable {
  // A view's rows, fetched a level (and a page of 200 children) at a time; drawn with virtual
  // scrolling, so only the rows on screen are in the DOM.
  constructor(host, { onSort, onSelect } = {}) {
    this.host = host; this.onSort = onSort; this.onSelect = onSelect;
    this.head = el("div", "tt-head"); this.scroll = el("div", "tt-scroll"); this.rowsEl = el("div", "tt-rows");
    this.notesEl = el("div", "notes");
    // the header scrolls sideways with the rows (sticky on top), so a narrow window scrolls
    // instead of cutting the last columns off
    this.scroll.append(this.head, this.rowsEl);
    host.replaceChildren(this.notesEl, this.scroll);
    this.scroll.addEventListener("scroll", () => this.draw());
    new ResizeObserver(() => this.draw()).observe(this.scroll);
    this.ROW = 24; this.visible = []; this.sel = null;
  }

  async load(pid, cmd, query) {
    const view = await getJSON(`/api/view/${pid}/${cmd}?${query}`);
    this.base = { pid, cmd, query }; this.view = view;
    this.nodes = new Map();
    this.root = { row: { i: -1, children: view.top }, kids: [], open: true };
    this.nodes.set(-1, this.root);
    for (const row of view.rows) this.add(row);
    this.sel = null;
    this.notesEl.textContent = view.notes.join("  ");
    this.header();
    this.flatten();
    this.scroll.scrollTop = 0;
    this.draw();
    return view;
  }

  add(row) {
    if (this.nodes.has(row.i)) return this.nodes.get(row.i);
    const node = { row, kids: null, open: false };
    this.nodes.set(row.i, node);
    const parent = this.nodes.get(row.parent);
    if (parent) { (parent.kids = parent.kids || []).push(node); parent.open = true; }
    return node;
  }

  header() {
    const cols = this.view.columns, list = this.view.layout === "groups";  // a list's totals are cumulative
    this.cols = cols;
    const name = el("div", "tt-name", this.view.label);
    name.addEventListener("click", () => this.onSort && this.onSort("name"));
    const cells = [name];
    for (const c of cols) {
      const total = c.name.startsWith("total_");
      const base = c.name.replace(/^total_/, "");
      const d = el("div", "num" + (total ? " total" : ""), LABELS[base] || base);
      d.appendChild(el("small", null, total ? (list ? "cumulative" : "total") : "self"));
      d.title = `${c.name} — click to order by ${c.order_by}, again to turn the order round; drag its right edge to resize`;
      if (c.order_by && c.order_by === this.view.options.order_by) {
        d.classList.add("sorted");
        d.firstChild.textContent += this.view.reverse ? " ▲" : " ▼";
      }
      d.style.width = `var(--w${cells.length - 1}, 96px)`;
      d.appendChild(this.grip(cells.length - 1));
      if (c.order_by) d.addEventListener("click", () => this.onSort && this.onSort(c.order_by));
      cells.push(d);
    }
    if (this.view.options.order_by === "name") {
      name.classList.add("sorted");
      name.firstChild.textContent += this.view.reverse ? " ▼" : " ▲";
    }
    this.head.replaceChildren(...cells);
    this.fitWidth();
    // bars behind the first total column, relative to the largest top-level value
    this.barCol = list ? -1 : cols.findIndex((c) => c.name.startsWith("total_"));
    this.barMax = 0;
    if (this.barCol >= 0) for (const n of this.root.kids) this.barMax = Math.max(this.barMax, n.row.values[this.barCol]);
  }

  fitWidth() {
    // the name column's least width and every number column's (its own where it was resized)
    this.widths = this.widths || {};
    const numbers = this.cols.reduce((s, c, j) => s + (this.widths[j] || 96) + 16, 0);
    const wide = `${260 + numbers}px`;
    this.head.style.minWidth = wide; this.rowsEl.style.minWidth = wide;
  }

  grip(j) {
    // drag a number column's right edge to resize it: every row's cell of that column follows
    const g = el("span", "grip");
    g.addEventListener("click", (e) => e.stopPropagation());
    g.addEventListener("mousedown", (e) => {
      e.preventDefault(); e.stopPropagation();
      const start = e.clientX, from = this.widths[j] || 96;
      const move = (m) => {
        this.widths[j] = Math.max(40, from + m.clientX - start);
        this.host.style.setProperty(`--w${j}`, `${this.widths[j]}px`);
        this.fitWidth();
      };
      const up = () => { window.removeEventListener("mousemove", move); window.removeEventListener("mouseup", up); };
      window.addEventListener("mousemove", move); window.addEventListener("mouseup", up);
    });
    return g;
  }

  flatten() {
    const out = [];
    const walk = (node) => {
      for (const kid of node.kids || []) {
        out.push(kid);
        // -select kernels: an open row shows the GPU work its node launched, then its children
        if (kid.open) for (const k of kid.row.kernels || []) out.push({ kernel: k, level: kid.row.level + 1 });
        if (kid.open && kid.kids) walk(kid);
      }
      const left = node.row.children - (node.kids ? node.kids.length : 0);
      if (node.open && node.kids && left > 0) out.push({ more: node, left });
    };
    walk(this.root);
    this.visible = out;
    this.rowsEl.style.height = `${out.length * this.ROW}px`;
  }

  draw() {
    if (!this.view) return;
    const top = this.scroll.scrollTop, h = this.scroll.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / this.ROW) - 5), last = Math.min(this.visible.length, first + Math.ceil(h / this.ROW) + 10);
    const frag = document.createDocumentFragment();
    for (let k = first; k < last; k++) frag.appendChild(this.rowEl(this.visible[k], k));
    this.rowsEl.replaceChildren(frag);
  }

  rowEl(item, k) {
    const d = el("div", "tt-row");
    d.style.top = `${k * this.ROW}px`;
    if (item.more) {
      d.classList.add("more");
      const pad = item.more.row.i < 0 ? 0 : item.more.row.level + 1;
      d.textContent = `${"\u2003".repeat(pad)}    ▸ show ${Math.min(item.left, 200)} more of ${item.left} remaining`;
      d.addEventListener("click", () => this.more(item.more));
      return d;
    }
    if (item.kernel) {
      const k = item.kernel;
      d.classList.add("kernel");
      const name = el("div", "tt-name");
      name.style.paddingLeft = `${6 + item.level * 16 + 16}px`;
      const nm = nameEl("span", "nm", `[${k.kind}] ${k.name}`);
      nm.title = `${k.name}\n${k.kind}: ${Fmt.time(k.micros)}, ${k.runs} run${k.runs === 1 ? "" : "s"}`;
      name.append(nm, el("span", "n", `${k.runs}×`));
      d.appendChild(name);
      // its time goes in the self accelerator-time column, where its op's own time is
      this.cols.forEach((c, j) => {
        const cell = el("div", "num" + (c.name.startsWith("total_") ? " total" : ""),
          c.name === "accelerator_exec_micros" ? Fmt.time(k.micros) : "");
        cell.style.width = `var(--w${j}, 96px)`;
        d.appendChild(cell);
      });
      return d;
    }
    const r = item.row;
    d.dataset.i = r.i;
    if (this.sel === r.i) d.classList.add("sel");
    const name = el("div", "tt-name");
    name.style.paddingLeft = `${6 + r.level * 16}px`;
    const opens = r.children || (r.kernels && r.kernels.length);
    const tw = el("span", "tw", opens ? (item.open && (item.kids || !r.children) ? "▼" : "▶") : "");
    tw.addEventListener("click", (e) => { e.stopPropagation(); this.toggle(item); });
    const nm = nameEl("span", "nm", r.name);
    name.append(tw, nm);
    if (r.children) name.appendChild(el("span", "n", `${r.children}`));
    d.appendChild(name);
    this.cols.forEach((c, j) => {
      const total = c.name.startsWith("total_");
      const v = r.values[j];
      const cell = el("div", "num" + (total ? " total" : "") + (!total && !r.accounted ? " dim" : ""));
      cell.style.width = `var(--w${j}, 96px)`;
      if (j === this.barCol && this.barMax > 0 && v > 0) {
        const fill = el("div", "fill");
        fill.style.width = `${Math.min(100, (100 * v) / this.barMax)}%`;
        cell.appendChild(fill);
      }
      cell.appendChild(el("span", null, !total && !r.accounted ? "--" : Fmt.value(c.kind, v)));
      d.appendChild(cell);
    });
    d.addEventListener("click", () => this.select(r.i));
    d.addEventListener("dblclick", () => this.toggle(item));
    return d;
  }

  select(i) {
    this.sel = i;
    const node = this.nodes.get(i);
    this.draw();
    if (this.onSelect && node) this.onSelect(node.row);
  }

  url(kind, extra) {
    const { pid, cmd, query } = this.base;
    return `/api/${kind}/${pid}/${cmd}?${query}${query ? "&" : ""}${extra}`;
  }

  async fetchKids(node, limit = 200) {
    const offset = node.kids ? node.kids.length : 0;
    const page = await getJSON(this.url("children", `node=${node.row.i}&offset=${offset}&limit=${limit}`));
    node.kids = node.kids || [];
    for (const row of page.rows) this.add(row);
    node.open = true;
  }

  async toggle(node) {
    if (!node.row.children) {
      if (!(node.row.kernels && node.row.kernels.length)) return;
      node.open = !node.open;  // a leaf with GPU work: show or hide its lines
      this.flatten(); this.draw();
      return;
    }
    if (node.open && node.kids) node.open = false;
    else if (node.kids) node.open = true;
    else await this.fetchKids(node);
    this.flatten(); this.draw();
  }

  async more(node) { await this.fetchKids(node); this.flatten(); this.draw(); }

  async expandAll(limit = 20000) {
    // every row of the view (up to `limit`) in one request, each level opened; a view loaded
    // meanwhile (an option changed) wins, and this answer is dropped
    const view = this.view;
    this.notesEl.textContent = "Expanding…";
    const page = await getJSON(this.url("subtree", `node=-1&limit=${limit}`));
    if (this.view !== view) return;
    for (const row of page.rows) this.add(row);
    for (const node of this.nodes.values()) if (node.kids && node.kids.length) node.open = true;
    this.notesEl.textContent = [...view.notes, page.rows.length < page.total
      ? `${page.rows.length.toLocaleString()} of ${page.total.toLocaleString()} rows opened; the rest open level by level` : ""]
      .filter(Boolean).join("  ");
    this.flatten(); this.draw();
  }

  collapseAll() {
    for (const node of this.nodes.values()) if (node !== this.root) node.open = false;
    this.flatten(); this.draw();
  }

  async reveal(i, path) {
    // open the ancestors of row i (top-level first), loading pages until each is there
    let parent = this.root;
    for (const step of [...path, i]) {
      while (!this.nodes.has(step) && parent.kids.length < parent.row.children) await this.fetchKids(parent, 2000);
      const node = this.nodes.get(step);
      if (!node) break;
      parent.open = true;
      parent = node;
      if (step !== i && !node.kids) await this.fetchKids(node, 2000);
    }
    this.flatten();
    const k = this.visible.findIndex((n) => n.row && n.row.i === i);
    if (k >= 0) this.scroll.scrollTop = Math.max(0, k * this.ROW - this.scroll.clientHeight / 3);
    this.select(i);
  }

  rows() { return this.visible.filter((n) => n.row).map((n) => n.row); }
}

window.Fmt = Fmt; window.TreeTable = TreeTable; window.getJSON = getJSON; window.download = download; window.el = el; window.nameEl = nameEl;
