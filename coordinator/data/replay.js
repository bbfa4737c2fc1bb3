// meshcast replay: draws a traced run on a <canvas>, step by step. No libraries, no network.
// Data (from coordinator/output/replay.py): runs[], each with cols, rows, torus, steps and
// multicasts[] holding node ids (x * rows + y), and links as flat [from, to, step, ...] triples;
// under wormhole switching also worms as flat [worm, node, in, out, first, count, ...] runs
// (count flits of the worm that came into node on port in (4: injected there) left it on port out
// (4: to its processor) in the cycles first .. first + count - 1; ports +x, -x, +y, -y are 0-3)
// and wormIds (each worm's source x, y and number, flat).
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("replay-data").textContent);
  const runs = DATA.runs;
  const STEPS = Math.max(0, ...runs.map((r) => r.steps));
  // Link load, light to heavy, in greys: no hue, so it clashes with no algorithm's colour.
  const HEAT = ["#c8c8c8", "#a9a9a9", "#8a8a8a", "#6b6b6b", "#4c4c4c"];
  const TRAIL = 12;  // wormhole: cycles a header's crossing stays drawn, fading
  const OTHER = "#9a9a9a";  // shared network: the other multicasts' traffic under the chosen one
  const units = new Set(runs.map((r) => (r.switching === "wormhole" ? "cycle" : "step")));
  const unit = units.size === 1 ? Array.from(units)[0] : "step/cycle";

  // The time base: "steps" (the recorded steps; cycles under wormhole) or, for free-clock runs
  // that measured wall-clock latencies, "wall": the slider then runs over WTICKS equal slices of
  // the longest latency, a destination is delivered once its own latency has passed, and each
  // panel draws the packets of the furthest step its multicasts had reached by then.
  const WTICKS = 200;
  const WALLMAX = Math.max(0, ...runs.filter((r) => r.clock === "free")
    .flatMap((r) => r.multicasts.flatMap((m) => m.wall.filter((w) => w >= 0))));
  let timebase = "steps";
  let pos = 0;  // the slider's position: a step, or a wall-clock slice
  let step = 0;  // the step a panel draws (pos in steps; in wall time, set per panel by render)
  const wallAt = (t) => (t / WTICKS) * WALLMAX;  // ns since injection
  function isDelivered(m, k) {  // destination k of multicast m delivered by now
    if (timebase === "wall") return m.wall[k] >= 0 && m.wall[k] <= wallAt(pos);
    return m.arrive[k] >= 0 && m.arrive[k] <= step;
  }
  let playing = false, phase = 0, lastTime = null;
  let follow = false;  // the slider spans the chosen multicast's lifetime (panel 0's choice)

  const $ = (id) => document.getElementById(id);
  const slider = $("slider"), label = $("steplabel"), playButton = $("play");
  slider.max = String(STEPS);
  const tip = $("tip");

  function fmt(v, digits) {
    if (v === null || v === undefined) return "–";
    return typeof v === "number" && !Number.isInteger(v) ? v.toFixed(digits === undefined ? 3 : digits) : String(v);
  }

  // --- one panel per run: its canvas, its geometry and its side table ----------------------
  function Panel(run, index) {
    this.run = run;
    this.index = index;
    this.unit = run.switching === "wormhole" ? "cycle" : "step";
    this.selected = run.multicasts.length > 1 ? "all" : String(run.multicasts[0].id);
    this.shared = run.contention === "shared";
    this.pad = run.torus ? 0.95 : 0.45;
    this.view = { z: 1, ox: 0, oy: 0 };
    this.pinned = null;  // a clicked node [x, y] or link [x1, y1, x2, y2]
    this.left0 = 28;
    this.top0 = 6;
    const box = document.createElement("div");
    box.className = "panel";
    const main = document.createElement("div");
    const head = document.createElement("div");
    head.className = "phead";
    head.innerHTML = "<label>multicast <select></select></label> " +
      "<button data-z='1.5' title='zoom in (or the mouse wheel)'>+</button>" +
      "<button data-z='0.6667' title='zoom out'>&minus;</button>" +
      "<button data-z='0' title='the whole network'>fit</button> " +
      "<button data-x='png' title='this frame as a PNG image'>PNG</button>" +
      "<button data-x='svg' title='this frame as an SVG drawing'>SVG</button>";
    this.mcSelect = head.querySelector("select");
    this.mcSelect.id = index ? "mc-" + index : "mc";
    this.canvas = document.createElement("canvas");
    this.canvas.id = "grid-" + index;
    this.ctx = this.canvas.getContext("2d");
    const sideBox = document.createElement("div");
    sideBox.className = "side";
    this.side = document.createElement("div");
    this.tl = document.createElement("canvas");  // the arrival timeline
    this.tl.className = "timeline";
    this.info = document.createElement("div");  // what the clicked node or link shows
    this.info.className = "info";
    sideBox.append(this.side, this.tl, this.info);
    this.hasWorms = run.multicasts.some((m) => m.worms && m.worms.length > 0);
    main.append(head, this.canvas);
    box.append(main, sideBox);
    $("panels").appendChild(box);
    head.querySelectorAll("button").forEach((b) => b.addEventListener("click", () => {
      if (b.dataset.x) this.download(b.dataset.x);
      else if (b.dataset.z === "0") this.fit();
      else this.zoomAt(Number(b.dataset.z), this.width / 2, this.height / 2);
    }));
    this.layout();
    this.listen();
  }

  // The canvas's size: the window's width shared by the panels (side by side where it allows),
  // a cell of 3 to 56 px; zoom and pan then scale and move the grid inside it.
  Panel.prototype.layout = function () {
    const run = this.run, n = Math.max(run.cols, run.rows);
    const avail = Math.max(200, (window.innerWidth - 40) / runs.length - 320);
    const high = Math.max(200, window.innerHeight - 150);
    this.base = Math.max(3, Math.min(56, Math.floor(Math.min(620, avail, high) / n)));
    this.width = Math.round(this.left0 + (run.cols - 1 + 2 * this.pad) * this.base + 6);
    this.height = Math.round(this.top0 + (run.rows - 1 + 2 * this.pad) * this.base + 22);
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(this.width * dpr);
    this.canvas.height = Math.round(this.height * dpr);
    this.canvas.style.width = this.width + "px";
    this.canvas.style.height = this.height + "px";
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.applyView();
  };

  Panel.prototype.applyView = function () {
    this.cell = this.base * this.view.z;
    this.sz = Math.min(this.cell, 56);  // marks grow with the zoom up to their size at 56 px a cell
    this.left = this.left0 + this.view.ox;
    this.top = this.top0 + this.view.oy;
  };

  // Zoom by f about the canvas point (cx, cy), which stays where it is; 1x (the whole network) to 40x.
  Panel.prototype.zoomAt = function (f, cx, cy) {
    const z = Math.max(1, Math.min(40, this.view.z * f));
    const gx = (cx - this.left) / this.cell, gy = (cy - this.top) / this.cell;
    this.view.z = z;
    this.view.ox = cx - gx * this.base * z - this.left0;
    this.view.oy = cy - gy * this.base * z - this.top0;
    if (z === 1) this.view.ox = this.view.oy = 0;
    this.applyView();
    render();
  };

  Panel.prototype.pan = function (dx, dy) {
    if (this.view.z === 1) return;  // the whole network is in view
    this.view.ox += dx;
    this.view.oy += dy;
    this.applyView();
    render();
  };

  Panel.prototype.fit = function () {
    this.view = { z: 1, ox: 0, oy: 0 };
    this.applyView();
    render();
  };

  // The node or link under canvas point (ex, ey): {node: id} or {link: [a, b]}, or null.
  Panel.prototype.hit = function (ex, ey) {
    const run = this.run;
    const gx = (ex - this.left) / this.cell - this.pad, gy = run.rows - 1 - ((ey - this.top) / this.cell - this.pad);
    const rx = Math.round(gx), ry = Math.round(gy);
    const inside = (x, y) => x >= 0 && y >= 0 && x < run.cols && y < run.rows;
    if (inside(rx, ry) && Math.hypot(gx - rx, gy - ry) < 0.3) return { node: rx * run.rows + ry };
    const wrap = (v, n) => (run.torus ? (v + n) % n : v);
    if (Math.abs(gy - ry) < 0.2) {  // along a row: the link from floor(gx) to the next column
      const x0 = Math.floor(gx), a = wrap(x0, run.cols), b = wrap(x0 + 1, run.cols);
      if (inside(a, ry) && inside(b, ry) && a !== b) return { link: [a * run.rows + ry, b * run.rows + ry] };
    }
    if (Math.abs(gx - rx) < 0.2) {
      const y0 = Math.floor(gy), a = wrap(y0, run.rows), b = wrap(y0 + 1, run.rows);
      if (inside(rx, a) && inside(rx, b) && a !== b) return { link: [rx * run.rows + a, rx * run.rows + b] };
    }
    return null;
  };

  // Mouse: hover shows a node's or a link's details, a click pins them beside the grid, the
  // wheel zooms about the pointer and a drag pans.
  Panel.prototype.listen = function () {
    const cv = this.canvas;
    let drag = null;
    const at = (e) => { const r = cv.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
    cv.addEventListener("wheel", (e) => {
      e.preventDefault();
      const [x, y] = at(e);
      this.zoomAt(e.deltaY < 0 ? 1.25 : 0.8, x, y);
    }, { passive: false });
    cv.addEventListener("mousedown", (e) => { drag = { x: e.clientX, y: e.clientY, moved: false }; });
    window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });
    cv.addEventListener("mousemove", (e) => {
      if (drag && e.buttons & 1) {
        const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
        if (drag.moved || Math.abs(dx) + Math.abs(dy) > 3) {
          drag.moved = true;
          drag.x = e.clientX;
          drag.y = e.clientY;
          this.pan(dx, dy);
        }
        return;
      }
      const [x, y] = at(e), h = this.hit(x, y);
      if (!h) { tip.style.display = "none"; return; }
      tip.innerHTML = this.describe(this.inspect(h.node !== undefined ? this.xy(h.node) : this.xy(h.link[0]).concat(this.xy(h.link[1]))));
      tip.style.display = "block";
      tip.style.left = (e.pageX + 14) + "px";
      tip.style.top = (e.pageY + 10) + "px";
    });
    cv.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    cv.addEventListener("click", (e) => {
      if (drag && drag.moved) return;
      const [x, y] = at(e), h = this.hit(x, y);
      this.pinned = !h ? null : h.node !== undefined ? this.xy(h.node) : this.xy(h.link[0]).concat(this.xy(h.link[1]));
      render();
    });
  };

  Panel.prototype.xy = function (id) {
    return [Math.floor(id / this.run.rows), id % this.run.rows];
  };
  Panel.prototype.px = function (x) {
    return this.left + (x + this.pad) * this.cell;
  };
  Panel.prototype.py = function (y) {
    return this.top + (this.run.rows - 1 - y + this.pad) * this.cell;
  };

  // The shown multicasts: the selected one, or all of them.
  Panel.prototype.shown = function () {
    const all = this.run.multicasts;
    if (this.selected === "all") return all;
    const one = all.filter((m) => String(m.id) === this.selected);
    return one.length ? one : all;
  };

  // The others: in a shared network (a load run) the multicasts not chosen, whose traffic the
  // chosen one met; none in "all" or when each multicast ran alone (a sweep).
  Panel.prototype.others = function () {
    if (!this.shared || this.selected === "all") return [];
    return this.run.multicasts.filter((m) => String(m.id) !== this.selected);
  };

  // A multicast's lifetime: its injection to its last arrival, link crossing or flit.
  function lifetime(m) {
    let lo = m.injected || 0, hi = lo;
    for (let i = 2; i < m.links.length; i += 3) { lo = Math.min(lo, m.links[i]); hi = Math.max(hi, m.links[i] + 1); }
    for (let i = 0; i < m.worms.length; i += 6) { lo = Math.min(lo, m.worms[i + 4]); hi = Math.max(hi, m.worms[i + 4] + m.worms[i + 5]); }
    for (const t of m.arrive) if (t >= 0) hi = Math.max(hi, t);
    return [lo, hi];
  }

  // Pixel segments of link a -> b: one, or two stubs for a torus wrap-around link.
  Panel.prototype.segments = function (a, b) {
    const [ax, ay] = this.xy(a), [bx, by] = this.xy(b);
    const x0 = this.px(ax), y0 = this.py(ay), x1 = this.px(bx), y1 = this.py(by);
    const wx = Math.abs(bx - ax) > 1 ? (bx > ax ? -1 : 1) : 0;
    const wy = Math.abs(by - ay) > 1 ? (by > ay ? -1 : 1) : 0;
    if (!wx && !wy) return [[x0, y0, x1, y1]];
    const s = this.cell * (this.pad - 0.12);
    // leaving a's edge outwards, entering b from the opposite edge (screen y grows downwards)
    return [
      [x0, y0, x0 + wx * s, y0 - wy * s],
      [x1 - wx * s, y1 + wy * s, x1, y1],
    ];
  };

  // In wall time: the furthest step reached by any delivered destination of the shown multicasts.
  Panel.prototype.stepAt = function () {
    if (timebase !== "wall") return pos;
    let s = 0;
    for (const m of this.shown()) m.dests.forEach((d, k) => { if (isDelivered(m, k)) s = Math.max(s, m.arrive[k]); });
    return s;
  };

  // Worms of multicast m at the start of cycle t (flits sent in cycles < t have crossed), from
  // its flit runs: per worm the links it holds (its head crossed, its tail not yet), the flits
  // in network input buffers (crossed into a node minus gone on or ejected there, per node) and
  // its heads (nodes its front has reached and not left, where it still is; a branching worm
  // has one per branch). Worms with nothing held and nothing buffered are left out.
  // An input channel is a node's port (node * 5 + port; port 4: its injection channel). A worm
  // can pass a node twice (some trees on a torus do): its passes through a channel follow each
  // other, so a channel's or a link's count of crossed flits is in its current pass modulo L.
  Panel.prototype.neighbour = function (a, port) {  // the node across port (0-3) of a, or -1
    const run = this.run;
    let x = Math.floor(a / run.rows) + [1, -1, 0, 0][port], y = (a % run.rows) + [0, 0, 1, -1][port];
    if (run.torus) {
      x = (x + run.cols) % run.cols;
      y = (y + run.rows) % run.rows;
    } else if (x < 0 || y < 0 || x >= run.cols || y >= run.rows) return -1;
    return x * run.rows + y;
  };

  Panel.prototype.wormState = function (m, t) {
    const W = m.worms, L = this.run.flits, per = new Map();
    const OPP = [1, 0, 3, 2];
    for (let i = 0; i < W.length; i += 6) {
      const k = Math.min(W[i + 5], Math.max(0, t - W[i + 4]));
      if (k === 0) continue;
      let s = per.get(W[i]);
      if (!s) per.set(W[i], (s = { links: new Map(), into: new Map(), outs: new Map() }));
      const a = W[i + 1], came = a * 5 + W[i + 2], out = W[i + 3];
      let o = s.outs.get(came);
      if (!o) s.outs.set(came, (o = { ports: [0, 0, 0, 0, 0], spans: [] }));
      o.ports[out] += k;
      o.spans.push([W[i + 4], W[i + 4] + k]);
      if (out === 4) continue;
      const b = this.neighbour(a, out);
      if (b < 0) continue;
      s.links.set(a * 5 + out, (s.links.get(a * 5 + out) || 0) + k);
      const into = b * 5 + OPP[out];
      s.into.set(into, (s.into.get(into) || 0) + k);
    }
    const out = [];
    for (const [w, s] of per) {
      const holds = [], buffers = [], heads = [];
      for (const [key, k] of s.links) {
        if (k % L !== 0) holds.push([Math.floor(key / 5), this.neighbour(Math.floor(key / 5), key % 5)]);
      }
      let buffered = 0;
      for (const [key, k] of s.into) {
        const v = Math.floor(key / 5), from = this.neighbour(v, key % 5);
        const o = s.outs.get(key) || { ports: [0, 0, 0, 0, 0], spans: [] };
        // one flit leaves a channel a cycle, on all its branches at once: count the cycles
        let gone = 0, end = -1;
        for (const [a, b] of o.spans.sort((p, q) => p[0] - q[0])) {
          if (b > end) { gone += b - Math.max(a, end); end = b; }
        }
        const here = Math.max(0, k - gone);
        const goneOn = Math.max(o.ports[0], o.ports[1], o.ports[2], o.ports[3]);
        const pass = k - ((k - 1) % L + 1);  // flits of its earlier passes through this channel
        buffered += here;
        if (here > 0) buffers.push([from, v, here]);
        if ((k % L !== 0 || here > 0) && goneOn <= pass) heads.push([from, v]);
      }
      if (!holds.length && !buffered) continue;
      const xy = (v) => this.xy(v);
      heads.sort((p, q) => p[1] - q[1]);
      holds.sort((p, q) => p[0] - q[0] || p[1] - q[1]);
      out.push({
        index: w,
        worm: m.wormIds.slice(3 * w, 3 * w + 3),
        head: heads.length ? xy(heads[0][1]) : null,
        heads: heads.map((h) => xy(h[1])),
        holds: holds.map(([a, b]) => xy(a).concat(xy(b))),
        buffered: buffered,
        links: holds,
        headLinks: heads,
        buffers: buffers,
      });
    }
    return out.sort((p, q) => p.index - q.index);
  };

  // Worms: the channels each holds as a thick band in its multicast's colour, each head as an
  // arrowhead outlined in black, and the flits waiting in an input buffer as small dark squares
  // at the buffer's end of the link (a number beside them past four).
  Panel.prototype.drawWorms = function (shown, others) {
    const ctx = this.ctx, c = this.sz;
    let worms = 0, buffered = 0;
    const marks = [];
    ctx.lineCap = "butt";
    for (const m of others.concat(shown)) {
      if (!m.worms.length) continue;
      const mine = others.length === 0 || String(m.id) === this.selected;
      for (const w of this.wormState(m, step)) {
        if (mine) {
          worms++;
          buffered += w.buffered;
        }
        ctx.strokeStyle = mine ? m.colour : OTHER;
        ctx.globalAlpha = mine ? 0.75 : 0.5;
        ctx.lineWidth = mine ? Math.max(5, c * 0.3) : Math.max(3, c * 0.18);
        for (const [a, b] of w.links) {
          for (const [x0, y0, x1, y1] of this.segments(a, b)) {
            ctx.beginPath();
            ctx.moveTo(x0, y0);
            ctx.lineTo(x1, y1);
            ctx.stroke();
          }
        }
        ctx.globalAlpha = 1;
        if (mine) marks.push([m.colour, w]);
      }
    }
    return { worms: worms, buffered: buffered, marks: marks };
  };

  Panel.prototype.drawWormMarks = function (marks) {  // over the nodes: heads and buffered flits
    const ctx = this.ctx, c = this.sz;
    const near = (a, b, f) => {  // a point on link a -> b, a fraction f of a cell before b
      const segs = this.segments(a, b), [x0, y0, x1, y1] = segs[segs.length - 1];
      const len = Math.hypot(x1 - x0, y1 - y0) || 1;
      return [x1 - ((x1 - x0) / len) * f * c, y1 - ((y1 - y0) / len) * f * c, (x1 - x0) / len, (y1 - y0) / len];
    };
    for (const [colour, w] of marks) {
      for (const [a, b] of w.headLinks) {
        const [X, Y, ux, uy] = near(a, b, 0.22);
        const size = Math.max(8, c * 0.36);
        ctx.fillStyle = colour;
        ctx.beginPath();
        ctx.moveTo(X + ux * size * 0.5, Y + uy * size * 0.5);
        ctx.lineTo(X - ux * size * 0.6 - uy * size * 0.55, Y - uy * size * 0.6 + ux * size * 0.55);
        ctx.lineTo(X - ux * size * 0.6 + uy * size * 0.55, Y - uy * size * 0.6 - ux * size * 0.55);
        ctx.closePath();
        ctx.fill();
        ctx.lineWidth = 1.5;
        ctx.strokeStyle = "#000";
        ctx.stroke();
      }
      for (const [a, b, n] of w.buffers) {
        const sq = Math.max(3, c * 0.1);
        const shown = Math.min(n, 4);
        ctx.fillStyle = "#222";
        ctx.strokeStyle = "#fff";
        ctx.lineWidth = 1;
        for (let i = 0; i < shown; i++) {
          const [X, Y] = near(a, b, 0.5 + i * 0.14);
          ctx.fillRect(X - sq / 2, Y - sq / 2, sq, sq);
          ctx.strokeRect(X - sq / 2, Y - sq / 2, sq, sq);
        }
        if (n > 4) {
          const [X, Y] = near(a, b, 0.5 + 4 * 0.14 + 0.06);
          ctx.fillStyle = "#222";
          ctx.font = "bold " + Math.max(9, Math.round(c * 0.24)) + "px system-ui, sans-serif";
          ctx.textAlign = "center";
          ctx.textBaseline = "middle";
          ctx.fillText(String(n), X, Y);
        }
      }
    }
  };

  Panel.prototype.drawGrid = function () {
    const ctx = this.ctx, run = this.run, c = this.cell;
    ctx.lineWidth = 1;
    ctx.strokeStyle = "#d0d0d0";
    ctx.beginPath();
    for (let y = 0; y < run.rows; y++) {
      ctx.moveTo(this.px(0), this.py(y));
      ctx.lineTo(this.px(run.cols - 1), this.py(y));
    }
    for (let x = 0; x < run.cols; x++) {
      ctx.moveTo(this.px(x), this.py(0));
      ctx.lineTo(this.px(x), this.py(run.rows - 1));
    }
    ctx.stroke();
    if (run.torus) {  // wrap-around links: dashed stubs beyond every edge
      const s = c * (this.pad - 0.12);
      ctx.setLineDash([3, 3]);
      ctx.beginPath();
      for (let y = 0; y < run.rows; y++) {
        ctx.moveTo(this.px(0) - s, this.py(y));
        ctx.lineTo(this.px(0), this.py(y));
        ctx.moveTo(this.px(run.cols - 1), this.py(y));
        ctx.lineTo(this.px(run.cols - 1) + s, this.py(y));
      }
      for (let x = 0; x < run.cols; x++) {
        ctx.moveTo(this.px(x), this.py(0) + s);
        ctx.lineTo(this.px(x), this.py(0));
        ctx.moveTo(this.px(x), this.py(run.rows - 1));
        ctx.lineTo(this.px(x), this.py(run.rows - 1) - s);
      }
      ctx.stroke();
      ctx.setLineDash([]);
    }
  };

  // Coordinates, outside the grid's clip: x along the bottom, y up the left side (row 0 at the
  // bottom), every label that fits; zoomed in, those of the columns and rows in view.
  Panel.prototype.drawLabels = function () {
    const ctx = this.ctx, run = this.run, c = this.cell;
    const every = Math.ceil(16 / c);
    ctx.fillStyle = "#666";
    ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (let x = 0; x < run.cols; x += every) {
      const X = this.px(x);
      if (X >= this.left0 && X <= this.width) ctx.fillText(String(x), X, this.height - 16);
    }
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let y = 0; y < run.rows; y += every) {
      const Y = this.py(y);
      if (Y >= 0 && Y <= this.height - 18) ctx.fillText(String(y), this.left0 - 6, Y);
    }
  };

  // Link load up to step t (traversals sent in steps <= t), summed over the shown multicasts.
  // Multicasts that shared the network (a load run) add up; multicasts that each ran alone (a
  // sweep, isolated contention) never met, so a link's load is the most any one of them put on it.
  Panel.prototype.load = function (shown, t) {
    const counts = new Map();
    const n = this.run.cols * this.run.rows, sum = this.shared || shown.length < 2;
    for (const m of shown) {
      const mine = sum ? counts : new Map();
      const L = m.links;
      for (let i = 0; i < L.length; i += 3) {
        if (L[i + 2] > t) continue;
        const a = L[i], b = L[i + 1];
        const key = a < b ? a * n + b : b * n + a;
        mine.set(key, (mine.get(key) || 0) + 1);
      }
      if (!sum) for (const [key, k] of mine) counts.set(key, Math.max(counts.get(key) || 0, k));
    }
    return counts;
  };

  Panel.prototype.traffic = function (shown) {  // whose link load is drawn: the others' too, if shared
    return this.shared ? shown.concat(this.others()) : shown;
  };

  Panel.prototype.drawLoad = function (shown) {
    const ctx = this.ctx, n = this.run.cols * this.run.rows;
    const traffic = this.traffic(shown);
    const now = this.load(traffic, step);
    if (this.mostFor !== this.selected) {  // the scale: the busiest link at the end, per choice
      let top = 1;
      for (const v of this.load(traffic, Infinity).values()) top = Math.max(top, v);
      this.most = Math.max(top, 4);  // a link crossed once stays a light colour, whatever the run
      this.mostFor = this.selected;
    }
    const most = this.most;
    ctx.lineCap = "round";
    for (const [key, k] of now) {
      const a = Math.floor(key / n), b = key % n;
      const f = (k - 1) / (most - 1);
      ctx.strokeStyle = HEAT[Math.min(HEAT.length - 1, Math.round(f * (HEAT.length - 1)))];
      ctx.lineWidth = 3.5 + f * Math.max(3, this.sz * 0.14);
      for (const [x0, y0, x1, y1] of this.segments(a, b)) {
        ctx.beginPath();
        ctx.moveTo(x0, y0);
        ctx.lineTo(x1, y1);
        ctx.stroke();
      }
    }
    ctx.lineCap = "butt";
  };

  function arrowHead(ctx, x0, y0, x1, y1, size) {
    const ang = Math.atan2(y1 - y0, x1 - x0);
    ctx.beginPath();
    ctx.moveTo(x1, y1);
    ctx.lineTo(x1 - size * Math.cos(ang - 0.45), y1 - size * Math.sin(ang - 0.45));
    ctx.lineTo(x1 - size * Math.cos(ang + 0.45), y1 - size * Math.sin(ang + 0.45));
    ctx.closePath();
    ctx.fill();
  }

  // Packets in flight: the traversals sent in this step, as arrows with a packet moving along.
  // Under wormhole switching the trace holds one crossing per link and worm (its header's), so
  // the crossings of the last TRAIL cycles stay drawn, fading, to show where the worms went.
  Panel.prototype.drawFlight = function (shown, grey) {
    const ctx = this.ctx, c = (grey ? 0.6 : 1) * this.sz, r = Math.max(2.5, c * 0.13);
    const trail = this.run.switching === "wormhole" && !this.hasWorms ? TRAIL : 1;
    let count = 0;
    for (const m of shown) {
      const colour = grey ? OTHER : m.colour;
      const L = m.links;
      for (let i = 0; i < L.length; i += 3) {
        const age = step - L[i + 2];
        if (age < 0 || age >= trail) continue;
        if (age === 0) count++;
        ctx.globalAlpha = 1 - age / trail;
        const segs = this.segments(L[i], L[i + 1]);
        ctx.strokeStyle = colour;
        ctx.fillStyle = colour;
        ctx.lineWidth = Math.max(3, c * 0.11);
        segs.forEach(([x0, y0, x1, y1], j) => {
          const sh = (j === segs.length - 1 ? r * 1.6 : 0);
          const len = Math.hypot(x1 - x0, y1 - y0) || 1;
          const ex = x1 - ((x1 - x0) / len) * sh, ey = y1 - ((y1 - y0) / len) * sh;
          ctx.beginPath();
          ctx.moveTo(x0, y0);
          ctx.lineTo(ex, ey);
          ctx.stroke();
          if (j === segs.length - 1) arrowHead(ctx, x0, y0, ex, ey, Math.max(6, c * 0.28));
        });
        if (age > 0) continue;
        // the packet: a dot along the whole path, at this step's phase (half way when paused)
        const f = playing ? phase : 0.5;
        let total = 0;
        for (const [x0, y0, x1, y1] of segs) total += Math.hypot(x1 - x0, y1 - y0);
        let d = f * total;
        for (const [x0, y0, x1, y1] of segs) {
          const len = Math.hypot(x1 - x0, y1 - y0);
          if (d <= len || len === 0) {
            const g = len ? d / len : 0;
            ctx.beginPath();
            ctx.arc(x0 + g * (x1 - x0), y0 + g * (y1 - y0), r, 0, 2 * Math.PI);
            ctx.fill();
            ctx.lineWidth = 1;
            ctx.strokeStyle = "#fff";
            ctx.stroke();
            break;
          }
          d -= len;
        }
      }
    }
    ctx.globalAlpha = 1;
    return count;
  };

  Panel.prototype.drawNodes = function (shown, many) {
    const ctx = this.ctx, run = this.run, c = this.sz;
    const reached = new Set(), dests = new Map(), sources = new Map();
    for (const m of shown) {
      sources.set(m.source, m.colour);
      const L = m.links;
      for (let i = 0; i < L.length; i += 3) if (L[i + 2] + 1 <= step) reached.add(L[i + 1]);
      m.dests.forEach((d, k) => {
        const t = m.arrive[k];
        const prev = dests.get(d);
        const done = isDelivered(m, k);
        if (!prev || (done && !prev.done)) dests.set(d, { done: done, t: t, colour: m.colour });
      });
    }
    const small = Math.max(1.5, c * 0.09);
    ctx.fillStyle = "#b5b5b5";
    ctx.beginPath();
    for (let id = 0; id < run.cols * run.rows; id++) {
      if (reached.has(id) || dests.has(id) || sources.has(id)) continue;
      const [x, y] = this.xy(id);
      ctx.moveTo(this.px(x) + small, this.py(y));
      ctx.arc(this.px(x), this.py(y), small, 0, 2 * Math.PI);
    }
    ctx.fill();
    const relay = Math.max(2.5, c * 0.16);
    ctx.lineWidth = 1.2;
    for (const id of reached) {  // relays the multicast has passed through
      if (dests.has(id) || sources.has(id)) continue;
      const [x, y] = this.xy(id);
      ctx.beginPath();
      ctx.arc(this.px(x), this.py(y), relay, 0, 2 * Math.PI);
      ctx.fillStyle = "#fff";
      ctx.fill();
      ctx.strokeStyle = "#555";
      ctx.stroke();
    }
    const rd = Math.max(4, c * 0.3);
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.font = "bold " + Math.max(8, Math.round(c * 0.3)) + "px system-ui, sans-serif";
    for (const [id, d] of dests) {
      const [x, y] = this.xy(id), X = this.px(x), Y = this.py(y);
      const colour = d.colour;
      ctx.beginPath();
      ctx.arc(X, Y, rd, 0, 2 * Math.PI);
      if (d.done) {
        ctx.fillStyle = colour;
        ctx.fill();
        ctx.lineWidth = 1;
        ctx.strokeStyle = "#222";
        ctx.stroke();
        if (c >= 18) {  // the arrival step, white with a dark edge: readable on any colour
          ctx.lineWidth = 2.5;
          ctx.strokeStyle = "#000";
          ctx.strokeText(String(d.t), X, Y + 0.5);
          ctx.fillStyle = "#fff";
          ctx.fillText(String(d.t), X, Y + 0.5);
        }
      } else {  // waiting: a ring
        ctx.fillStyle = "#fff";
        ctx.fill();
        ctx.lineWidth = Math.max(1.5, c * 0.07);
        ctx.strokeStyle = colour;
        ctx.stroke();
      }
    }
    const crowd = sources.size > 12;  // a load run's many sources: small squares, no letter
    const rs = crowd ? Math.max(2.5, c * 0.16) : Math.max(5, c * 0.34);
    for (const [id, colour] of sources) {
      const [x, y] = this.xy(id), X = this.px(x), Y = this.py(y);
      ctx.fillStyle = colour;
      ctx.fillRect(X - rs, Y - rs, 2 * rs, 2 * rs);
      ctx.lineWidth = 1.5;
      ctx.strokeStyle = "#000";
      ctx.strokeRect(X - rs, Y - rs, 2 * rs, 2 * rs);
      if (c >= 14 && !crowd) {
        ctx.lineWidth = 2.5;
        ctx.strokeStyle = "#000";
        ctx.strokeText("S", X, Y + 0.5);
        ctx.fillStyle = "#fff";
        ctx.fillText("S", X, Y + 0.5);
      }
    }
  };

  Panel.prototype.delivered = function () {
    const out = new Map();
    for (const m of this.shown()) {
      m.dests.forEach((d, k) => {
        if (isDelivered(m, k)) out.set(d, this.xy(d));
      });
    }
    return Array.from(out.values()).sort((p, q) => p[0] - q[0] || p[1] - q[1]);
  };

  Panel.prototype.drawSide = function (shown, many, flying, worms, alive) {
    const run = this.run, unit = this.unit;
    const rows = [];
    const row = (k, v) => rows.push("<tr><td>" + k + "</td><td>" + v + "</td></tr>");
    row("network", run.topology + (run.torus ? " (wrap links dashed)" : ""));
    row("switching", run.switching + (run.switching === "wormhole" ? " (steps are cycles)" : ""));
    row("clock", run.clock);
    let total = 0, got = 0;
    for (const m of shown) {
      total += m.dests.length;
      m.dests.forEach((d, k) => { if (isDelivered(m, k)) got++; });
    }
    if (many) {
      row("multicasts", shown.length + (this.shared ? " (in one network)" : " (each ran alone)"));
      if (alive >= 0) row("alive now", alive + " (their sources and destinations drawn)");
    } else {
      const m = shown[0], M = m.metrics, [sx, sy] = this.xy(m.source);
      row("multicast", "#" + m.id + " " + m.algorithm + (m.injected ? " (injected at " + m.injected + ")" : ""));
      row("source", "(" + sx + "," + sy + ")");
      row("time", fmt(M.time) + " " + unit + "s");
      row("traffic", fmt(M.traffic) + " link traversals");
      row("additional traffic", fmt(M.additional_traffic));
      row("CV of arrivals", fmt(M.cv));
      if (M.cv_wall !== null && M.cv_wall !== undefined) row("CV (wall clock)", fmt(M.cv_wall));
      if (m.missing) row("not reached", String(m.missing));
    }
    row("delivered by now", got + " of " + total);
    let first = Infinity;
    for (const m of shown) for (let i = 2; i < m.links.length; i += 3) first = Math.min(first, m.links[i]);
    if (step < first && first !== Infinity) {  // e.g. a wormhole source's start-up and preparation
      row("first packet", "leaves in " + unit + " " + first);
    }
    row(this.run.switching === "wormhole" ? "headers crossing now" : "packets sent now", String(flying));
    if (this.hasWorms) {
      row("worms in the network", String(worms.worms));
      row("flits in input buffers", String(worms.buffered));
    }
    let html = "<h2>" + escape(run.title) + "</h2><table>" + rows.join("") + "</table>";
    if (!many) {  // the latest arrivals, with wall-clock times where the run measured them
      const m = shown[0], recent = [];
      m.dests.forEach((d, k) => { if (isDelivered(m, k)) recent.push(k); });
      recent.sort((p, q) => m.arrive[q] - m.arrive[p]);
      if (recent.length) {
        html += "<div class='note'>latest arrivals: " + recent.slice(0, 6).map((k) => {
          const [x, y] = this.xy(m.dests[k]);
          const wall = run.clock === "free" && m.wall[k] >= 0 ? " (" + (m.wall[k] / 1000).toFixed(0) + " µs)" : "";
          return "(" + x + "," + y + ")@" + m.arrive[k] + wall;
        }).join(", ") + (recent.length > 6 ? ", …" : "") + "</div>";
      }
    }
    const algs = new Map();  // the colour key: each algorithm of the run, its colour as in the plots
    for (const m of run.multicasts) {
      const a = algs.get(m.algorithm) || { colour: m.colour, count: 0, chosen: false };
      a.count++;
      a.chosen = a.chosen || (!many && m === shown[0]);
      algs.set(m.algorithm, a);
    }
    html += "<div class='legend'><div class='algkey'>" + Array.from(algs).map(([name, a]) =>
      "<div class='alg' data-algorithm='" + escape(name) + "' data-colour='" + a.colour + "'" +
      (a.chosen ? " style='font-weight:600'" : "") + "><span class='key' style='background:" + a.colour +
      "'></span>" + escape(name) + (a.count > 1 ? " (" + a.count + ")" : "") + (a.chosen ? " &larr; chosen" : "") +
      "</div>").join("") + (this.others().length ? "<div class='alg'><span class='key' style='background:" + OTHER +
      "'></span>the other multicasts' traffic</div>" : "") + "</div>" +
      "<div><span class='key' style='background:#888'></span>source S</div>" +
      "<div><span class='key' style='border-radius:50%;background:#fff;border:2px solid #888'></span>destination, waiting</div>" +
      "<div><span class='key' style='border-radius:50%;background:#888'></span>destination, delivered (arrival " + unit + ")</div>" +
      "<div><span class='key' style='border-radius:50%;background:#fff'></span>relay passed</div>" +
      "<div><span class='key' style='background:#888'></span>packet sent this " + unit + (run.switching === "wormhole" ? "" : ", arriving the next") +
      (run.switching === "wormhole" ? (this.hasWorms ? " (a worm's header)" : " (a worm's header; faded: the last " + TRAIL + " cycles)") : "") + "</div>" +
      (this.hasWorms ? "<div><span class='key' style='background:#888;opacity:.75;border:none'></span>channels a worm holds (its head crossed, its tail not yet)</div>" +
        "<div><span class='key' style='border:none;background:none;font-size:11px;line-height:12px'>&#9654;</span>" +
        "a worm's head (one per branch)</div>" +
        "<div><span class='key' style='background:#222;border-color:#fff;width:6px;height:6px;vertical-align:0'></span> " +
        "flits waiting in an input buffer (a number past 4)</div>" : "") +
      "<div style='margin-top:4px'>link load so far (traversals" +
      (this.shared && !many ? ", every multicast's" : !this.shared && many ? "; the most of any one: they ran alone" : "") +
      ")</div><div class='heatbar'></div>" +
      "<div style='display:flex;justify-content:space-between'><span>1</span><span>" + (this.most || 1) +
      "</span></div></div>";
    if (run.clock === "free") {
      html += timebase === "wall"
        ? "<div class='note'>Wall clock: a destination is delivered once its measured latency has " +
          "passed; packets are drawn at the furthest step reached by then (the trace has steps only).</div>"
        : "<div class='note'>Free clock: replayed on the steps the nodes counted (one per hop); " +
          "'time: wall clock' replays the measured latencies.</div>";
    }
    if (run.switching === "wormhole") {
      html += this.hasWorms
        ? "<div class='note'>Wormhole, " + run.flits + " flits a message: at each cycle the worms as they are " +
          "then; a destination is delivered when the tail flit arrives.</div>"
        : "<div class='note'>Wormhole: the trace holds each worm header's link crossing; " +
          "a destination is delivered when the tail flit arrives.</div>";
    }
    this.side.innerHTML = html;
  };

  function escape(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;").replace(/'/g, "&#39;");  // also safe inside attributes
  }

  // The frame: the grid and what is on it at this step, clipped to the grid's area, then the
  // coordinates; drawn on the canvas, or on an SVG recorder by exportFrame("svg").
  Panel.prototype.drawFrame = function () {
    const ctx = this.ctx, shown = this.shown(), many = shown.length > 1, others = this.others();
    ctx.clearRect(0, 0, this.width, this.height);
    ctx.save();
    ctx.beginPath();
    ctx.rect(this.left0 - 4, 0, this.width - this.left0 + 4, this.height - 18);
    ctx.clip();
    this.drawGrid();
    this.drawLoad(shown);
    const worms = this.hasWorms ? this.drawWorms(shown, others) : { worms: 0, buffered: 0, marks: [] };
    if (others.length) this.drawFlight(others, true);
    const flying = this.drawFlight(shown, false);
    // Many at once (a load run's messages): the sources and destinations of those alive now only
    const crowd = shown.length > 12, alive = crowd ? shown.filter((m) => {
      const [lo, hi] = m.life || (m.life = lifetime(m));
      return lo <= step && step <= hi;
    }) : shown;
    this.drawNodes(alive, many);
    this.drawWormMarks(worms.marks);
    this.drawPinned();
    ctx.restore();
    this.drawLabels();
    return { shown: shown, many: many, flying: flying, worms: worms, alive: crowd ? alive.length : -1 };
  };

  Panel.prototype.draw = function () {
    const f = this.drawFrame();
    this.drawSide(f.shown, f.many, f.flying, f.worms, f.alive);
    this.drawTimeline(f.shown);
    this.info.innerHTML = this.pinned ? this.describe(this.inspect(this.pinned)) : "<span class='note'>hover or click a node or a link for its details; wheel or +/&minus; to zoom, drag to pan</span>";
  };

  Panel.prototype.drawPinned = function () {  // the clicked node or link, ringed in black
    if (!this.pinned) return;
    const ctx = this.ctx, p = this.pinned, c = this.sz;
    ctx.strokeStyle = "#000";
    ctx.lineWidth = 2.5;
    ctx.setLineDash([4, 3]);
    ctx.beginPath();
    if (p.length === 2) ctx.arc(this.px(p[0]), this.py(p[1]), Math.max(7, c * 0.45), 0, 2 * Math.PI);
    else {
      for (const [x0, y0, x1, y1] of this.segments(p[0] * this.run.rows + p[1], p[2] * this.run.rows + p[3])) {
        ctx.moveTo(x0, y0);
        ctx.lineTo(x1, y1);
      }
    }
    ctx.stroke();
    ctx.setLineDash([]);
  };

  // What a hover or a click shows, as data. A node [x, y]: its step now, the multicasts it is a
  // source or a destination of (arrival step, hops, delivered by now) and the multicasts that passed
  // it (the steps they came in and went out). A link [x1, y1, x2, y2]: the multicasts that crossed
  // it, each with its steps and direction, and how many crossings by now. Over every multicast of
  // the run, the chosen one first.
  Panel.prototype.inspect = function (what) {
    const run = this.run, rows = run.rows;
    const id = (x, y) => {
      if (!(Number.isInteger(x) && Number.isInteger(y) && x >= 0 && y >= 0 && x < run.cols && y < rows)) {
        throw new Error("no node (" + x + "," + y + ") in " + run.topology);
      }
      return x * rows + y;
    };
    const chosen = this.shown(), list = chosen.concat(run.multicasts.filter((m) => !chosen.includes(m)));
    const tag = (m) => ({ id: m.id, algorithm: m.algorithm, colour: m.colour, shown: chosen.includes(m) });
    if (what.length === 4) {
      const a = id(what[0], what[1]), b = id(what[2], what[3]);
      const near = [0, 1, 2, 3].some((port) => this.neighbour(a, port) === b);
      if (!near) throw new Error("no link between (" + what[0] + "," + what[1] + ") and (" + what[2] + "," + what[3] + ")");
      const crossings = [];
      let byNow = 0;
      for (const m of list) {
        const ab = [], ba = [];
        for (let i = 0; i < m.links.length; i += 3) {
          if (m.links[i] === a && m.links[i + 1] === b) ab.push(m.links[i + 2]);
          else if (m.links[i] === b && m.links[i + 1] === a) ba.push(m.links[i + 2]);
        }
        byNow += ab.concat(ba).filter((t) => t <= step).length;
        if (ab.length) crossings.push(Object.assign(tag(m), { from: this.xy(a), to: this.xy(b), steps: ab }));
        if (ba.length) crossings.push(Object.assign(tag(m), { from: this.xy(b), to: this.xy(a), steps: ba }));
      }
      return { link: what.slice(), step: step, unit: this.unit, crossings: crossings, crossed: byNow };
    }
    const v = id(what[0], what[1]);
    const source = [], destination = [], passed = [];
    for (const m of list) {
      if (m.source === v) source.push(Object.assign(tag(m), { injected: m.injected }));
      const k = m.dests.indexOf(v);
      if (k >= 0) {
        destination.push(Object.assign(tag(m), { arrival: m.arrive[k] >= 0 ? m.arrive[k] : null,
          hops: m.hops[k] >= 0 ? m.hops[k] : null, delivered: isDelivered(m, k) }));
      }
      const into = [], out = [];
      for (let i = 0; i < m.links.length; i += 3) {
        if (m.links[i + 1] === v) into.push(m.links[i + 2]);
        if (m.links[i] === v) out.push(m.links[i + 2]);
      }
      if (into.length || out.length) passed.push(Object.assign(tag(m), { in: into, out: out }));
    }
    const mine = destination.filter((d) => d.shown && d.arrival !== null);
    const first = mine.length ? mine.reduce((p, q) => (q.arrival < p.arrival ? q : p)) : null;
    return { node: [what[0], what[1]], step: step, unit: this.unit, arrival: first ? first.arrival : null,
      hops: first ? first.hops : null, source: source, destination: destination, passed: passed };
  };

  Panel.prototype.describe = function (d) {  // inspect()'s data as the hover box and the side show it
    const u = d.unit, few = (a) => a.slice(0, 8).join(", ") + (a.length > 8 ? ", … (" + a.length + ")" : "");
    const who = (m) => "<span class='key' style='background:" + m.colour + "'></span>#" + m.id + " " + escape(m.algorithm);
    if (d.link) {
      const lines = d.crossings.slice(0, 10).map((c) => who(c) + ": (" + c.from + ")&rarr;(" + c.to + ") in " + u + "s " + few(c.steps));
      if (d.crossings.length > 10) lines.push("… " + (d.crossings.length - 10) + " more");
      return "<b>link (" + d.link[0] + "," + d.link[1] + ")&ndash;(" + d.link[2] + "," + d.link[3] + ")</b>, crossed " +
        d.crossed + " times by " + u + " " + d.step + "<br>" + (lines.length ? lines.join("<br>") : "never crossed");
    }
    const lines = [];
    for (const m of d.source.slice(0, 6)) lines.push(who(m) + ": source" + (m.injected ? ", injected at " + m.injected : ""));
    for (const m of d.destination.slice(0, 6)) {
      lines.push(who(m) + ": destination, " + (m.arrival === null ? "never reached" : "arrives in " + u + " " + m.arrival +
        (m.hops !== null ? " after " + m.hops + " hops" : "") + (m.delivered ? " (delivered)" : " (waiting)")));
    }
    for (const m of d.passed.slice(0, 8)) {
      lines.push(who(m) + ": passed" + (m.in.length ? ", in at " + few(m.in) : "") + (m.out.length ? ", out at " + few(m.out) : ""));
    }
    if (d.passed.length > 8) lines.push("… " + (d.passed.length - 8) + " more multicasts passed");
    return "<b>node (" + d.node[0] + "," + d.node[1] + ")</b>" +
      (d.arrival !== null ? ": arrival " + u + " " + d.arrival + (d.hops !== null ? ", " + d.hops + " hops" : "") : "") +
      "<br>" + (lines.length ? lines.join("<br>") : "no multicast passed it");
  };

  // The arrival timeline: one row per destination of the shown multicasts, in order of arrival,
  // a dot at its arrival step (filled once delivered), and the slider's step as a vertical line;
  // a click on it seeks there.
  Panel.prototype.timelineRows = function (shown) {
    const out = [];
    for (const m of shown) m.dests.forEach((d, k) => out.push({ node: this.xy(d), mc: m.id, arrival: m.arrive[k],
      delivered: isDelivered(m, k), colour: m.colour }));
    return out.sort((p, q) => (p.arrival < 0) - (q.arrival < 0) || p.arrival - q.arrival || p.mc - q.mc);
  };

  Panel.prototype.drawTimeline = function (shown) {
    const rowsOf = this.timelineRows(shown), cv = this.tl;
    const W = 260, H = Math.max(40, Math.min(140, 14 + rowsOf.length * 4));
    const dpr = window.devicePixelRatio || 1;
    if (cv.width !== Math.round(W * dpr) || cv.height !== Math.round(H * dpr)) {
      cv.width = Math.round(W * dpr);
      cv.height = Math.round(H * dpr);
      cv.style.width = W + "px";
      cv.style.height = H + "px";
    }
    const ctx = cv.getContext("2d"), [lo, hi] = timebase === "wall" ? [0, STEPS] : range();  // in steps
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    const X = (t) => 6 + ((t - lo) / Math.max(1, hi - lo)) * (W - 12);
    this.tlScale = { lo: lo, hi: hi, W: W };
    ctx.fillStyle = "#666";
    ctx.font = "10px system-ui, sans-serif";
    ctx.textBaseline = "top";
    ctx.textAlign = "left";
    ctx.fillText("arrivals by destination (" + rowsOf.length + ")", 6, 1);
    ctx.textAlign = "right";
    ctx.fillText(this.unit + " " + lo + "–" + hi, W - 6, 1);
    const dy = (H - 16) / Math.max(1, rowsOf.length);
    rowsOf.forEach((r, i) => {
      if (r.arrival < 0) return;
      const x = X(r.arrival), y = 14 + (i + 0.5) * dy, rad = Math.max(1.5, Math.min(3, dy / 2));
      ctx.beginPath();
      ctx.arc(x, y, rad, 0, 2 * Math.PI);
      if (r.delivered) { ctx.fillStyle = r.colour; ctx.fill(); } else { ctx.strokeStyle = r.colour; ctx.lineWidth = 1; ctx.stroke(); }
    });
    const now = timebase === "wall" ? step : pos;
    ctx.strokeStyle = "#000";
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    ctx.moveTo(X(now), 12);
    ctx.lineTo(X(now), H);
    ctx.stroke();
    this.timeline = { step: now, rows: rowsOf };
  };

  // An SVG recorder with the canvas calls the drawing uses: exportFrame("svg") draws the frame on
  // it and gets the same picture as vector shapes.
  function SvgContext(width, height) {
    this.out = [];
    this.path = "";
    this.at = null;
    this.stack = [];
    this.open = 0;
    this.clips = 0;
    this.dash = [];
    Object.assign(this, { fillStyle: "#000", strokeStyle: "#000", lineWidth: 1, globalAlpha: 1, font: "10px sans-serif",
      textAlign: "start", textBaseline: "alphabetic", lineCap: "butt" });
    this.width = width;
    this.height = height;
  }
  const r2 = (v) => Math.round(v * 100) / 100;
  const attr = (s) => String(s).replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
  SvgContext.prototype = {
    setTransform() {}, setLineDash(d) { this.dash = d.slice(); },
    save() { this.stack.push({ fillStyle: this.fillStyle, strokeStyle: this.strokeStyle, lineWidth: this.lineWidth,
      globalAlpha: this.globalAlpha, open: this.open }); },
    restore() {
      const s = this.stack.pop();
      if (!s) return;
      while (this.open > s.open) { this.out.push("</g>"); this.open--; }
      Object.assign(this, { fillStyle: s.fillStyle, strokeStyle: s.strokeStyle, lineWidth: s.lineWidth, globalAlpha: s.globalAlpha });
    },
    clearRect(x, y, w, h) { this.out.push(`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" fill="#fff"/>`); },
    beginPath() { this.path = ""; this.at = null; },
    moveTo(x, y) { this.path += `M${r2(x)} ${r2(y)}`; this.at = [x, y]; },
    lineTo(x, y) { this.path += (this.at ? "L" : "M") + `${r2(x)} ${r2(y)}`; this.at = [x, y]; },
    closePath() { this.path += "Z"; },
    rect(x, y, w, h) { this.path += `M${r2(x)} ${r2(y)}h${r2(w)}v${r2(h)}h${r2(-w)}Z`; this.at = [x, y]; },
    arc(x, y, r, a0, a1) {
      const sx = x + r * Math.cos(a0), sy = y + r * Math.sin(a0);
      this.path += (this.at ? "L" : "M") + `${r2(sx)} ${r2(sy)}`;
      if (a1 - a0 >= 2 * Math.PI - 1e-6) {
        const ox = x - r * Math.cos(a0), oy = y - r * Math.sin(a0);
        this.path += `A${r2(r)} ${r2(r)} 0 1 1 ${r2(ox)} ${r2(oy)}A${r2(r)} ${r2(r)} 0 1 1 ${r2(sx)} ${r2(sy)}`;
        this.at = [sx, sy];
      } else {
        const ex = x + r * Math.cos(a1), ey = y + r * Math.sin(a1);
        this.path += `A${r2(r)} ${r2(r)} 0 ${a1 - a0 > Math.PI ? 1 : 0} 1 ${r2(ex)} ${r2(ey)}`;
        this.at = [ex, ey];
      }
    },
    alpha() { return this.globalAlpha < 1 ? ` opacity="${r2(this.globalAlpha)}"` : ""; },
    fill() { if (this.path) this.out.push(`<path d="${this.path}" fill="${attr(this.fillStyle)}"${this.alpha()}/>`); },
    stroke() {
      if (!this.path) return;
      const dash = this.dash.length ? ` stroke-dasharray="${this.dash.join(" ")}"` : "";
      this.out.push(`<path d="${this.path}" fill="none" stroke="${attr(this.strokeStyle)}" stroke-width="${r2(this.lineWidth)}"` +
        ` stroke-linecap="${this.lineCap}"${dash}${this.alpha()}/>`);
    },
    clip() {
      const id = "clip" + ++this.clips;
      this.out.push(`<clipPath id="${id}"><path d="${this.path}"/></clipPath><g clip-path="url(#${id})">`);
      this.open++;
    },
    fillRect(x, y, w, h) { this.out.push(`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" fill="${attr(this.fillStyle)}"${this.alpha()}/>`); },
    strokeRect(x, y, w, h) {
      this.out.push(`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" fill="none" stroke="${attr(this.strokeStyle)}" stroke-width="${r2(this.lineWidth)}"${this.alpha()}/>`);
    },
    text(s, x, y, paint) {
      const anchor = { center: "middle", right: "end", end: "end" }[this.textAlign] || "start";
      const base = { middle: "central", top: "hanging" }[this.textBaseline] || "alphabetic";
      this.out.push(`<text x="${r2(x)}" y="${r2(y)}" style="font:${attr(this.font)}" text-anchor="${anchor}" dominant-baseline="${base}" ${paint}${this.alpha()}>${attr(s)}</text>`);
    },
    fillText(s, x, y) { this.text(s, x, y, `fill="${attr(this.fillStyle)}"`); },
    strokeText(s, x, y) { this.text(s, x, y, `fill="none" stroke="${attr(this.strokeStyle)}" stroke-width="${r2(this.lineWidth)}"`); },
    svg() {
      while (this.open > 0) { this.out.push("</g>"); this.open--; }
      return `<svg xmlns="http://www.w3.org/2000/svg" width="${this.width}" height="${this.height}" viewBox="0 0 ${this.width} ${this.height}">` +
        this.out.join("") + "</svg>\n";
    },
  };

  // The current frame of this panel: "png" a data URL of the canvas, "svg" the SVG text.
  Panel.prototype.exportFrame = function (kind) {
    render();
    if (kind === "png") return this.canvas.toDataURL("image/png");
    if (kind !== "svg") throw new Error("no export kind " + kind + " (png or svg)");
    const canvas = this.ctx, rec = new SvgContext(this.width, this.height);
    this.ctx = rec;
    step = this.stepAt();
    try { this.drawFrame(); } finally { this.ctx = canvas; }
    return rec.svg();
  };

  Panel.prototype.download = function (kind) {  // the export buttons: the frame as a file
    const data = this.exportFrame(kind), a = document.createElement("a");
    const name = (this.run.title + "-" + this.unit + "-" + pos).replace(/[^A-Za-z0-9._-]+/g, "_");
    a.download = name + "." + kind;
    a.href = kind === "png" ? data : URL.createObjectURL(new Blob([data], { type: "image/svg+xml" }));
    document.body.appendChild(a);
    a.click();
    a.remove();
  };

  const panels = runs.map((r, i) => new Panel(r, i));

  // --- the multicast choice, per panel: one, or all at once --------------------------------
  panels.forEach((p) => {
    const ms = p.run.multicasts;
    if (ms.length > 1) {
      const o = document.createElement("option");
      o.value = "all";
      o.textContent = "all " + ms.length + " at once";
      p.mcSelect.appendChild(o);
    }
    for (const m of ms) {
      const [sx, sy] = p.xy(m.source), o = document.createElement("option");
      o.value = String(m.id);
      o.textContent = "#" + m.id + " " + m.algorithm + " from (" + sx + "," + sy + "), " + m.dests.length +
        " destinations" + (m.injected ? ", at " + m.injected : "");
      p.mcSelect.appendChild(o);
    }
    p.mcSelect.value = p.selected;
    p.mcSelect.addEventListener("change", () => select(p.mcSelect.value, p.index));
  });

  // The slider's range: every step, or with "follow" the lifetime of panel 0's chosen multicast.
  function range() {
    if (timebase === "wall") return [0, WTICKS];
    const p = panels[0];
    if (follow && p.selected !== "all") return lifetime(p.shown()[0]);
    return [0, STEPS];
  }
  const top = () => range()[1];

  function render() {
    const [lo, hi] = range();
    slider.min = String(lo);
    slider.max = String(hi);
    slider.value = String(pos);
    label.textContent = timebase === "wall"
      ? (wallAt(pos) / 1e6).toFixed(3) + " ms / " + (WALLMAX / 1e6).toFixed(3) + " ms"
      : unit + " " + pos + " / " + hi;
    playButton.textContent = playing ? "pause" : "play";
    for (const p of panels) {
      step = p.stepAt();
      p.draw();
    }
    step = timebase === "wall" ? panels[0].stepAt() : pos;
  }

  function seek(t) {
    const n = Math.round(Number(t)), [lo, hi] = range();
    pos = Math.max(lo, Math.min(hi, Number.isFinite(n) ? n : lo));
    phase = 0;
    render();
    return pos;
  }

  function setTimebase(mode) {
    if (mode !== "steps" && mode !== "wall") throw new Error("no time base " + mode);
    if (mode === "wall" && !(WALLMAX > 0)) throw new Error("no wall-clock latencies in this run");
    timebase = mode;
    $("timebase").value = mode;
    pos = 0;
    pause();
    return timebase;
  }

  // Choose multicast id (or "all") in panel run, or in every panel that has it.
  function select(id, run) {
    const want = String(id);
    const has = (p) => (want === "all" ? p.run.multicasts.length > 1 : p.run.multicasts.some((m) => String(m.id) === want));
    const which = run === undefined ? panels.filter(has) : [panels[run]].filter((p) => p && has(p));
    if (!which.length) throw new Error("no multicast " + want + (run === undefined ? "" : " in run " + run));
    for (const p of which) {
      p.selected = want;
      p.mcSelect.value = want;
    }
    seek(pos);  // inside the chosen one's lifetime when the slider follows it
    return want;
  }

  function setFollow(on) {
    follow = Boolean(on);
    $("follow").checked = follow;
    seek(follow && panels[0].selected !== "all" ? range()[0] : pos);
    return range();
  }

  function tick(now) {
    if (!playing) return;
    if (lastTime !== null) {
      phase += ((now - lastTime) / 1000) * Number($("speed").value);
      while (phase >= 1 && pos < top()) {
        phase -= 1;
        pos++;
      }
      if (pos >= top()) {
        playing = false;
        phase = 0;
      }
    }
    lastTime = now;
    render();
    if (playing) requestAnimationFrame(tick);
  }

  function play() {
    if (playing) return;
    if (pos >= top()) pos = range()[0];
    playing = true;
    lastTime = null;
    phase = 0;
    render();
    requestAnimationFrame(tick);
  }

  function pause() {
    playing = false;
    phase = 0;
    render();
  }

  playButton.addEventListener("click", () => (playing ? pause() : play()));
  $("back").addEventListener("click", () => { pause(); seek(pos - 1); });
  $("fwd").addEventListener("click", () => { pause(); seek(pos + 1); });
  if (WALLMAX > 0) {
    $("timebase-box").style.display = "";
    $("timebase").addEventListener("change", () => setTimebase($("timebase").value));
  }
  $("follow").addEventListener("change", () => setFollow($("follow").checked));
  slider.addEventListener("input", () => { const v = slider.value; playing = false; seek(v); });
  panels.forEach((p) => p.tl.addEventListener("click", (e) => {
    const r = p.tl.getBoundingClientRect(), sc = p.tlScale;
    if (timebase === "wall") return;
    pause();
    seek(sc.lo + ((e.clientX - r.left - 6) / (sc.W - 12)) * (sc.hi - sc.lo));
  }));
  document.addEventListener("keydown", (e) => {
    const tag = e.target && e.target.tagName;
    if (tag === "SELECT" || tag === "INPUT" || (tag === "BUTTON" && e.key === " ")) return;  // theirs
    if (e.key === "ArrowLeft") { pause(); seek(pos - 1); e.preventDefault(); }
    else if (e.key === "ArrowRight") { pause(); seek(pos + 1); e.preventDefault(); }
    else if (e.key === "Home") { pause(); seek(range()[0]); e.preventDefault(); }
    else if (e.key === "End") { pause(); seek(range()[1]); e.preventDefault(); }
    else if (e.key === " ") { (playing ? pause : play)(); e.preventDefault(); }
  });
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => { panels.forEach((p) => p.layout()); render(); }, 100);
  });

  // The scripting interface (tests, screenshots): seek, state, select, play, pause, timebase;
  // follow (the slider spans the chosen multicast's lifetime), inspect (what a hover or a click on
  // a node [x, y] or a link [x1, y1, x2, y2] shows, as data), exportFrame ("png": a data URL,
  // "svg": the SVG text), zoom (by a factor about a canvas point, default its middle; 0: fit),
  // pan (by pixels), view and linkLoad (each link's load drawn now: [x1, y1, x2, y2, load]).
  // In wall time ``step`` is the slider's slice and ``wall_ns`` the latency it stands for.
  const panel = (run) => {
    const p = panels[run === undefined ? 0 : run];
    if (!p) throw new Error("no run " + run);
    return p;
  };
  window.replay = {
    seek: seek,
    select: select,
    play: play,
    pause: pause,
    timebase: setTimebase,
    follow: setFollow,
    inspect: function (what, run) {
      const p = panel(run);
      step = p.stepAt();
      if (!Array.isArray(what) || (what.length !== 2 && what.length !== 4)) throw new Error("inspect [x, y] or [x1, y1, x2, y2]");
      return p.inspect(what);
    },
    pin: function (what, run) {  // as a click does: null unpins
      const p = panel(run);
      if (what !== null) p.inspect(what);  // refuses a node or link not there
      p.pinned = what;
      render();
      return p.info.textContent;
    },
    exportFrame: function (kind, run) { return panel(run).exportFrame(kind); },
    zoom: function (factor, run, at) {
      const p = panel(run), [x, y] = at || [p.width / 2, p.height / 2];
      if (factor === 0) p.fit(); else p.zoomAt(factor, x, y);
      return Object.assign({}, p.view);
    },
    pan: function (dx, dy, run) { const p = panel(run); p.pan(dx, dy); return Object.assign({}, p.view); },
    view: function (run) {
      const p = panel(run);
      return { zoom: p.view.z, cell: p.cell, width: p.width, height: p.height,
        origin: [p.px(0), p.py(0)] };  // node (0, 0)'s canvas point
    },
    linkLoad: function (run) {
      const p = panel(run), n = p.run.cols * p.run.rows;
      step = p.stepAt();
      const out = [];
      for (const [key, k] of p.load(p.traffic(p.shown()), step)) out.push(p.xy(Math.floor(key / n)).concat(p.xy(key % n), [k]));
      return out.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2] || a[3] - b[3]);
    },
    state: function (run) {
      const p = panel(run), [lo, hi] = range();
      const out = { step: pos, first: lo, steps: hi, selected: p.selected, playing: playing, delivered: p.delivered(),
        timebase: timebase, follow: follow, timeline: p.timeline };
      if (timebase === "wall") out.wall_ns = wallAt(pos);
      if (p.hasWorms && timebase === "steps" && p.selected !== "all") {  // the chosen multicast's worms now
        const m = p.shown()[0];
        out.worms = p.wormState(m, pos).map((w) => ({ worm: w.worm, head: w.head, heads: w.heads,
          holds: w.holds, buffered: w.buffered }));
      }
      return out;
    },
  };
  render();
})();
