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
  const HEAT = ["#fdae61", "#f88d52", "#f46d43", "#d73027", "#a50026"];  // link load, light to heavy
  const TRAIL = 12;  // wormhole: cycles a header's crossing stays drawn, fading
  const DEST = "#ff9f1c", DEST_EDGE = "#8a5300", PACKET = "#1f4fd1", SOURCE = "#c62828";
  const unit = runs.some((r) => r.switching === "wormhole") ? "cycle" : "step";

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
  const top = () => (timebase === "wall" ? WTICKS : STEPS);
  const wallAt = (t) => (t / WTICKS) * WALLMAX;  // ns since injection
  function isDelivered(m, k) {  // destination k of multicast m delivered by now
    if (timebase === "wall") return m.wall[k] >= 0 && m.wall[k] <= wallAt(pos);
    return m.arrive[k] >= 0 && m.arrive[k] <= step;
  }
  let selected = runs[0].multicasts.length > 1 ? "all" : String(runs[0].multicasts[0].id);
  let playing = false, phase = 0, lastTime = null;

  const $ = (id) => document.getElementById(id);
  const slider = $("slider"), label = $("steplabel"), playButton = $("play"), mcSelect = $("mc");
  slider.max = String(STEPS);

  function fmt(v, digits) {
    if (v === null || v === undefined) return "–";
    return typeof v === "number" && !Number.isInteger(v) ? v.toFixed(digits === undefined ? 3 : digits) : String(v);
  }

  // --- one panel per run: its canvas, its geometry and its side table ----------------------
  function Panel(run) {
    this.run = run;
    const n = Math.max(run.cols, run.rows);
    this.cell = Math.max(12, Math.min(56, Math.floor(620 / n)));
    this.pad = run.torus ? 0.95 : 0.45;
    const c = this.cell;
    this.left = 28;
    this.top = 6;
    this.width = Math.round(this.left + (run.cols - 1 + 2 * this.pad) * c + 6);
    this.height = Math.round(this.top + (run.rows - 1 + 2 * this.pad) * c + 22);
    const box = document.createElement("div");
    box.className = "panel";
    this.canvas = document.createElement("canvas");
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(this.width * dpr);
    this.canvas.height = Math.round(this.height * dpr);
    this.canvas.style.width = this.width + "px";
    this.canvas.style.height = this.height + "px";
    this.ctx = this.canvas.getContext("2d");
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.side = document.createElement("div");
    this.side.className = "side";
    this.hasWorms = run.multicasts.some((m) => m.worms && m.worms.length > 0);
    box.appendChild(this.canvas);
    box.appendChild(this.side);
    $("panels").appendChild(box);
  }

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
    if (selected === "all") return all;
    const one = all.filter((m) => String(m.id) === selected);
    return one.length ? one : all;
  };

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
  Panel.prototype.drawWorms = function (shown) {
    const ctx = this.ctx, c = this.cell;
    let worms = 0, buffered = 0;
    const marks = [];
    ctx.lineCap = "butt";
    for (const m of shown) {
      if (!m.worms.length) continue;
      for (const w of this.wormState(m, step)) {
        worms++;
        buffered += w.buffered;
        ctx.strokeStyle = m.colour;
        ctx.globalAlpha = 0.75;
        ctx.lineWidth = Math.max(5, c * 0.3);
        for (const [a, b] of w.links) {
          for (const [x0, y0, x1, y1] of this.segments(a, b)) {
            ctx.beginPath();
            ctx.moveTo(x0, y0);
            ctx.lineTo(x1, y1);
            ctx.stroke();
          }
        }
        ctx.globalAlpha = 1;
        marks.push([m.colour, w]);
      }
    }
    return { worms: worms, buffered: buffered, marks: marks };
  };

  Panel.prototype.drawWormMarks = function (marks) {  // over the nodes: heads and buffered flits
    const ctx = this.ctx, c = this.cell;
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
    ctx.clearRect(0, 0, this.width, this.height);
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
    // coordinates: x along the bottom, y up the left side (row 0 at the bottom)
    const every = Math.ceil(16 / c);
    ctx.fillStyle = "#666";
    ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (let x = 0; x < run.cols; x += every) ctx.fillText(String(x), this.px(x), this.height - 16);
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let y = 0; y < run.rows; y += every) ctx.fillText(String(y), this.left - 6, this.py(y));
  };

  // Link load up to step t (traversals sent in steps <= t), summed over the shown multicasts.
  Panel.prototype.load = function (shown, t) {
    const counts = new Map();
    const n = this.run.cols * this.run.rows;
    for (const m of shown) {
      const L = m.links;
      for (let i = 0; i < L.length; i += 3) {
        if (L[i + 2] > t) continue;
        const a = L[i], b = L[i + 1];
        const key = a < b ? a * n + b : b * n + a;
        counts.set(key, (counts.get(key) || 0) + 1);
      }
    }
    return counts;
  };

  Panel.prototype.drawLoad = function (shown) {
    const ctx = this.ctx, n = this.run.cols * this.run.rows;
    const now = this.load(shown, step);
    if (this.mostFor !== selected) {  // the scale: the busiest link at the end, per choice
      let top = 1;
      for (const v of this.load(shown, Infinity).values()) top = Math.max(top, v);
      this.most = Math.max(top, 4);  // a link crossed once stays a light colour, whatever the run
      this.mostFor = selected;
    }
    const most = this.most;
    ctx.lineCap = "round";
    for (const [key, k] of now) {
      const a = Math.floor(key / n), b = key % n;
      const f = (k - 1) / (most - 1);
      ctx.strokeStyle = HEAT[Math.min(HEAT.length - 1, Math.round(f * (HEAT.length - 1)))];
      ctx.lineWidth = 3.5 + f * Math.max(3, this.cell * 0.14);
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
  Panel.prototype.drawFlight = function (shown, many) {
    const ctx = this.ctx, c = this.cell, r = Math.max(2.5, c * 0.13);
    const trail = this.run.switching === "wormhole" && !this.hasWorms ? TRAIL : 1;
    let count = 0;
    for (const m of shown) {
      const colour = many ? m.colour : PACKET;
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
    const ctx = this.ctx, run = this.run, c = this.cell;
    const reached = new Set(), dests = new Map(), sources = new Map();
    for (const m of shown) {
      sources.set(m.source, many ? m.colour : SOURCE);
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
      const colour = many ? d.colour : DEST;
      ctx.beginPath();
      ctx.arc(X, Y, rd, 0, 2 * Math.PI);
      if (d.done) {
        ctx.fillStyle = colour;
        ctx.fill();
        ctx.lineWidth = 1;
        ctx.strokeStyle = many ? "#222" : DEST_EDGE;
        ctx.stroke();
        if (c >= 18) {
          ctx.fillStyle = many ? "#fff" : "#222";
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
    const rs = Math.max(5, c * 0.34);
    for (const [id, colour] of sources) {
      const [x, y] = this.xy(id), X = this.px(x), Y = this.py(y);
      ctx.fillStyle = colour;
      ctx.fillRect(X - rs, Y - rs, 2 * rs, 2 * rs);
      ctx.lineWidth = 1.5;
      ctx.strokeStyle = "#000";
      ctx.strokeRect(X - rs, Y - rs, 2 * rs, 2 * rs);
      if (c >= 14) {
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

  Panel.prototype.drawSide = function (shown, many, flying, worms) {
    const run = this.run;
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
      row("multicasts", shown.length + " (one colour each)");
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
    html += "<div class='legend'>" +
      "<div><span class='key' style='background:" + (many ? "#888" : SOURCE) + "'></span>source S</div>" +
      "<div><span class='key' style='border-radius:50%;background:#fff;border:2px solid " + (many ? "#888" : DEST) +
      "'></span>destination, waiting</div>" +
      "<div><span class='key' style='border-radius:50%;background:" + (many ? "#888" : DEST) +
      "'></span>destination, delivered (arrival " + unit + ")</div>" +
      "<div><span class='key' style='border-radius:50%;background:#fff'></span>relay passed</div>" +
      "<div><span class='key' style='background:" + (many ? "#888" : PACKET) + "'></span>packet sent this " + unit + (run.switching === "wormhole" ? "" : ", arriving the next") +
      (run.switching === "wormhole" ? (this.hasWorms ? " (a worm's header)" : " (a worm's header; faded: the last " + TRAIL + " cycles)") : "") + "</div>" +
      (this.hasWorms ? "<div><span class='key' style='background:" + (many ? "#888" : shown[0].colour) +
        ";opacity:.75;border:none'></span>channels a worm holds (its head crossed, its tail not yet)</div>" +
        "<div><span class='key' style='border:none;background:none;font-size:11px;line-height:12px'>&#9654;</span>" +
        "a worm's head (one per branch)</div>" +
        "<div><span class='key' style='background:#222;border-color:#fff;width:6px;height:6px;vertical-align:0'></span> " +
        "flits waiting in an input buffer (a number past 4)</div>" : "") +
      "<div style='margin-top:4px'>link load so far (traversals)</div><div class='heatbar'></div>" +
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
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  Panel.prototype.draw = function () {
    const shown = this.shown(), many = shown.length > 1;
    this.drawGrid();
    this.drawLoad(shown);
    const worms = this.hasWorms ? this.drawWorms(shown) : { worms: 0, buffered: 0, marks: [] };
    const flying = this.drawFlight(shown, many);
    this.drawNodes(shown, many);
    this.drawWormMarks(worms.marks);
    this.drawSide(shown, many, flying, worms);
  };

  const panels = runs.map((r) => new Panel(r));

  // --- the multicast choice: one, or all at once ------------------------------------------
  const ids = [];
  for (const r of runs) for (const m of r.multicasts) if (!ids.some((e) => e.id === String(m.id))) {
    const [sx, sy] = panels[0].xy(m.source);
    ids.push({ id: String(m.id), text: "#" + m.id + " " + m.algorithm + " from (" + sx + "," + sy + "), " +
      m.dests.length + " destinations" });
  }
  if (ids.length > 1) {
    const o = document.createElement("option");
    o.value = "all";
    o.textContent = "all " + ids.length + " at once";
    mcSelect.appendChild(o);
  }
  for (const e of ids) {
    const o = document.createElement("option");
    o.value = e.id;
    o.textContent = e.text;
    mcSelect.appendChild(o);
  }
  mcSelect.value = selected;

  function render() {
    slider.max = String(top());
    slider.value = String(pos);
    label.textContent = timebase === "wall"
      ? (wallAt(pos) / 1e6).toFixed(3) + " ms / " + (WALLMAX / 1e6).toFixed(3) + " ms"
      : unit + " " + pos + " / " + STEPS;
    playButton.textContent = playing ? "pause" : "play";
    for (const p of panels) {
      step = p.stepAt();
      p.draw();
    }
    step = timebase === "wall" ? panels[0].stepAt() : pos;
  }

  function seek(t) {
    const n = Math.round(Number(t));
    pos = Math.max(0, Math.min(top(), Number.isFinite(n) ? n : 0));
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

  function select(id) {
    const want = String(id);
    if (want !== "all" && !ids.some((e) => e.id === want)) throw new Error("no multicast " + want);
    selected = ids.length > 1 || want !== "all" ? want : ids[0].id;
    mcSelect.value = selected;
    render();
    return selected;
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
    if (pos >= top()) pos = 0;
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
  slider.addEventListener("input", () => { const v = slider.value; playing = false; seek(v); });
  mcSelect.addEventListener("change", () => select(mcSelect.value));
  document.addEventListener("keydown", (e) => {
    const tag = e.target && e.target.tagName;
    if (tag === "SELECT" || tag === "INPUT" || (tag === "BUTTON" && e.key === " ")) return;  // theirs
    if (e.key === "ArrowLeft") { pause(); seek(pos - 1); e.preventDefault(); }
    else if (e.key === "ArrowRight") { pause(); seek(pos + 1); e.preventDefault(); }
    else if (e.key === " ") { (playing ? pause : play)(); e.preventDefault(); }
  });

  // The scripting interface (tests, screenshots): seek, state, select, play, pause, timebase.
  // In wall time ``step`` is the slider's slice and ``wall_ns`` the latency it stands for.
  window.replay = {
    seek: seek,
    select: select,
    play: play,
    pause: pause,
    timebase: setTimebase,
    state: function (run) {
      const p = panels[run === undefined ? 0 : run];
      const out = { step: pos, steps: top(), selected: selected, playing: playing, delivered: p.delivered(),
        timebase: timebase };
      if (timebase === "wall") out.wall_ns = wallAt(pos);
      if (p.hasWorms && timebase === "steps" && selected !== "all") {  // the chosen multicast's worms now
        const m = p.shown()[0];
        out.worms = p.wormState(m, pos).map((w) => ({ worm: w.worm, head: w.head, heads: w.heads,
          holds: w.holds, buffered: w.buffered }));
      }
      return out;
    },
  };
  render();
})();
