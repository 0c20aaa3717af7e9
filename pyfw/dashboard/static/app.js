// pyfw dashboard: renders the state the server inlined in the page at once (no waiting for
// a request), then polls api/state every second for what is newer; a report renders the
// data inlined in it. Everything is drawn as inline SVG: no libraries, no network beyond
// the job's server.
"use strict";
(function () {
  const POLL_MS = 1000;
  const sources = new Map();   // id -> {id, kind, name, finished, latest, derived, history}
  let seq = -1, lastSeen = 0, meta = null, failures = 0;
  const inline = document.getElementById("pyfw-data");       // a report: the whole run
  const initial = document.getElementById("pyfw-initial");   // the live page's first state
  const token = new URLSearchParams(location.search).get("token");

  // ------------------------------------------------------------------ formatting
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;",
    ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  const num = (x) => (x === null || x === undefined) ? "?" :
    Number(x).toLocaleString("en-US", {maximumFractionDigits: 0});
  function sig(x, d = 3) {
    if (x === null || x === undefined || !isFinite(x)) return "?";
    if (x === 0) return "0";
    const a = Math.abs(x);
    if (a >= 1e9) return (x / 1e9).toPrecision(d) + "G";
    if (a >= 1e6) return (x / 1e6).toPrecision(d) + "M";
    if (a >= 1e4) return (x / 1e3).toPrecision(d) + "k";
    return a >= 100 ? x.toFixed(0) : x.toPrecision(d);
  }
  function secs(x) {
    if (x === null || x === undefined || !isFinite(x)) return "?";
    if (x < 1e-3) return (x * 1e6).toPrecision(3) + " µs";
    if (x < 1) return (x * 1e3).toPrecision(3) + " ms";
    return x.toPrecision(3) + " s";
  }
  function hms(x) {
    if (x === null || x === undefined || !isFinite(x)) return "?";
    x = Math.max(0, Math.round(x));
    const h = Math.floor(x / 3600), m = Math.floor(x % 3600 / 60), s = x % 60;
    const p = (v) => String(v).padStart(2, "0");
    return h ? `${h}:${p(m)}:${p(s)}` : `${m}:${p(s)}`;
  }
  const raw = (v) => (v === null || v === undefined) ? "" : String(v);
  function tile(metric, label, shown, value, bad) {
    return `<div class="tile${bad ? " bad" : ""}" data-metric="${metric}" ` +
      `data-value="${esc(raw(value))}"><span class="label">${esc(label)}</span>` +
      `<span class="value">${esc(shown)}</span></div>`;
  }

  // ------------------------------------------------------------------ colours
  const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function colour(f) {   // 0..1 -> viridis; NaN -> grey
    if (f === null || !isFinite(f)) return "#d5d8de";
    f = Math.min(1, Math.max(0, f)) * (VIRIDIS.length - 1);
    const i = Math.min(VIRIDIS.length - 2, Math.floor(f)), t = f - i;
    const c = VIRIDIS[i].map((v, k) => Math.round(v + (VIRIDIS[i + 1][k] - v) * t));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }
  const PALETTE = ["#2f6fdf", "#e4572e", "#29a36a", "#9b5de5", "#f2a541", "#17a2b8",
    "#d6336c", "#6c757d", "#8ac926", "#1982c4"];
  const pal = (i) => PALETTE[i % PALETTE.length];

  // ------------------------------------------------------------------ SVG helpers
  function ticks(lo, hi, n = 5) {
    if (!(hi > lo)) return [lo];
    const step0 = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= step0) || step0;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) out.push(v);
    return out;
  }
  function frame(w, h, x0, x1, y0, y1, xlabel, ylabel, yfmt) {
    const L = 48, R = 10, T = 8, B = 26;
    const sx = (x) => L + (x - x0) / ((x1 - x0) || 1) * (w - L - R);
    const sy = (y) => h - B - (y - y0) / ((y1 - y0) || 1) * (h - T - B);
    let s = `<rect x="${L}" y="${T}" width="${w - L - R}" height="${h - T - B}" ` +
      `fill="none" stroke="#e3e6eb"/>`;
    for (const v of ticks(y0, y1, 4)) {
      s += `<line x1="${L}" x2="${w - R}" y1="${sy(v)}" y2="${sy(v)}" stroke="#eef0f3"/>` +
        `<text x="${L - 4}" y="${sy(v) + 3}" text-anchor="end">${esc((yfmt || sig)(v))}</text>`;
    }
    const xfmt = x1 - x0 < 60 ? (v) => +v.toFixed(2) + " s" : hms;
    for (const v of ticks(x0, x1, 6)) {
      s += `<text x="${sx(v)}" y="${h - B + 13}" text-anchor="middle">${esc(xfmt(v))}</text>`;
    }
    s += `<text x="${w - R}" y="${h - 2}" text-anchor="end">${esc(xlabel)}</text>` +
      `<text x="4" y="${T + 2}" transform="rotate(90 4 ${T + 2})">${esc(ylabel)}</text>`;
    return {s, sx, sy, L, R, T, B};
  }
  function lineChart(series, xlabel, ylabel, opts = {}) {
    const w = 520, h = opts.height || 190;
    const pts = series.flatMap((s) => s.pts).filter((p) => p[1] !== null && isFinite(p[1]));
    if (pts.length < 1) return `<p class="note">no data yet</p>`;
    const x0 = Math.min(...pts.map((p) => p[0])), x1 = Math.max(...pts.map((p) => p[0]));
    const y1 = Math.max(opts.ymin1 || 0, ...pts.map((p) => p[1])) || 1;
    const f = frame(w, h, x0, x1 > x0 ? x1 : x0 + 1, 0, y1 * 1.05, xlabel, ylabel, opts.yfmt);
    let s = f.s;
    series.forEach((ser) => {
      const p = ser.pts.filter((q) => q[1] !== null && isFinite(q[1]))
        .map((q) => `${f.sx(q[0]).toFixed(1)},${f.sy(q[1]).toFixed(1)}`).join(" ");
      s += `<polyline fill="none" stroke="${ser.color}" stroke-width="1.8" points="${p}"/>`;
    });
    s += series.map((ser, i) => `<text x="${f.L + 6 + i * 110}" y="${f.T + 12}" ` +
      `style="fill:${ser.color}">${esc(ser.name)}</text>`).join("");
    return `<svg viewBox="0 0 ${w} ${h}" width="${w}" height="${h}">${s}</svg>`;
  }
  // A matrix of link figures as coloured cells; ``unit`` names what is shown and ``note``
  // explains it below the map. The colour scale is logarithmic (links differ by orders of
  // magnitude) from the lowest figure (dark purple) to the highest (yellow); grey: none yet.
  function heatMatrix(m, rows, cols, fmt, title, methods, unit, note) {
    const vals = m.flat().filter((v) => v !== null && isFinite(v) && v > 0);
    if (!vals.length) return `<p class="note">no link measured yet</p>`;
    let lo = Math.min(...vals), hi = Math.max(...vals);
    const tr = Math.log;
    const cw = Math.max(14, Math.min(46, 440 / cols.length)), ch = Math.max(14,
      Math.min(30, 300 / rows.length)), L = 44, T = 16;
    const w = L + cw * cols.length + 120, h = Math.max(T + ch * rows.length + 8, 70);
    let s = "";
    rows.forEach((r, i) => {
      s += `<text x="${L - 4}" y="${T + i * ch + ch / 2 + 3}" text-anchor="end">${esc(r)}</text>`;
      cols.forEach((c, j) => {
        const v = m[i][j];
        const f = (v === null || !isFinite(v) || v <= 0) ? null :
          (hi > lo ? (tr(v) - tr(lo)) / (tr(hi) - tr(lo)) : 0.5);
        const how = methods && methods[i] && methods[i][j] ? ` (forecast: ${methods[i][j]})` : "";
        s += `<rect x="${L + j * cw}" y="${T + i * ch}" width="${cw - 1}" height="${ch - 1}" ` +
          `fill="${colour(f)}" data-link="${esc(r)}-${esc(c)}" data-value="${esc(raw(v))}">` +
          `<title>${esc(`${title} ${r} → ${c}: ` +
          (f === null ? "not measured" : fmt(v)) + how)}</title></rect>`;
      });
    });
    cols.forEach((c, j) => {
      s += `<text x="${L + j * cw + cw / 2}" y="${T - 4}" text-anchor="middle">${esc(c)}</text>`;
    });
    const lx = L + cw * cols.length + 10, lh = h - T - 8;
    for (let k = 0; k < 20; k++) {
      s += `<rect x="${lx}" y="${T + k * lh / 20}" width="10" ` +
        `height="${lh / 20 + 0.5}" fill="${colour(1 - k / 19)}"/>`;
    }
    s += `<text x="${lx}" y="${T - 4}">${esc(unit)}</text>` +
      `<text x="${lx + 14}" y="${T + 8}">${esc(fmt(hi))}</text>` +
      `<text x="${lx + 14}" y="${h - 10}">${esc(fmt(lo))}</text>`;
    return `<svg viewBox="0 0 ${w} ${h}" width="${w}" height="${h}">${s}</svg>` +
      `<p class="note scale">${esc(note)} Colour: ${esc(unit)} on a log scale, dark = ` +
      `${esc(fmt(lo))} to yellow = ${esc(fmt(hi))}; grey: not measured yet.</p>`;
  }

  // ------------------------------------------------------------------ farm
  function utilisation(hist, ranks) {   // workers x time bins of busy fraction
    const nworkers = ranks.length;
    const w = 520, L = 48, R = 10, rowH = Math.max(6, Math.min(18, 160 / nworkers));
    const h = rowH * nworkers + 30;
    if (hist.length < 2 || !nworkers) return `<p class="note">no data yet</p>`;
    const t0 = hist[0].t, t1 = hist[hist.length - 1].t, nb = Math.min(120, hist.length - 1);
    const span = (t1 - t0) || 1, bw = (w - L - R) / nb;
    let s = "";
    for (let r = 0; r < nworkers; r++) {
      s += `<text x="${L - 4}" y="${r * rowH + rowH / 2 + 3}" text-anchor="end">r${ranks[r]}</text>`;
    }
    for (let b = 0; b < nb; b++) {
      const ta = t0 + span * b / nb, tb = t0 + span * (b + 1) / nb;
      let a = 0;
      while (a + 1 < hist.length && hist[a + 1].t <= ta) a++;   // last point at or before ta
      let z = Math.min(a + 1, hist.length - 1);   // points at one time: no span, no fraction
      while (z + 1 < hist.length && hist[z].t < tb) z++;        // first point at or after tb
      const pa = hist[a], pz = hist[z];
      const dt = pz.t - pa.t;
      for (let r = 0; r < nworkers; r++) {
        const f = dt > 0 && pa.busy[r] !== undefined && pz.busy[r] !== undefined ?
          (pz.busy[r] - pa.busy[r]) / dt : null;
        s += `<rect x="${L + b * bw}" y="${r * rowH}" width="${bw + 0.3}" height="${rowH - 1}" ` +
          `fill="${colour(f)}"><title>${esc(`rank ${ranks[r]} ${hms(pa.t)}–${hms(pz.t)}: ` +
          (f === null ? "?" : (100 * Math.min(1, f)).toFixed(0) + " % busy"))}</title></rect>`;
      }
    }
    s += `<text x="${L}" y="${h - 8}">${esc(hms(t0))}</text><text x="${w - R}" y="${h - 8}" ` +
      `text-anchor="end">${esc(hms(t1))} (colour: busy fraction, yellow = 100 %)</text>`;
    return `<svg viewBox="0 0 ${w} ${h}" width="${w}" height="${h}">${s}</svg>`;
  }
  function workerTable(ws, rates) {
    const head = ["rank", "host", "state", "tasks", "tasks/s", "chunk", "mean chunk",
      "in flight / limit", "busy s", "idle s"];
    const rows = ws.map((w, i) => {
      const st = !w.alive ? "dead" : (w.busy ? "busy" : "idle");
      const grp = w.group ? ` <span class="note" title="a multi-rank group (id:ranks), or ` +
        `held for a waiting multi-rank task">[${esc(w.group)}]</span>` : "";
      const skip = w.alive && w.unneeded ? ` <span class="note" title="chunks whose results ` +
        `are no longer needed (a straggler copy whose twin came back first, or a ` +
        `finished or cancelled round's): the worker was told to skip them">` +
        `(${w.unneeded} unneeded cop${w.unneeded > 1 ? "ies" : "y"})</span>` : "";
      const rate = rates ? rates[i] : null;
      return `<tr data-rank="${w.rank}"><td>${w.rank}</td><td class="l">${esc(w.host)}</td>` +
        `<td class="l" data-col="state" data-value="${st}"><span class="state ${st}"></span>` +
        `${st}${skip}${grp}</td>` +
        `<td data-col="tasks" data-value="${w.tasks}">${num(w.tasks)}</td>` +
        `<td data-col="rate" data-value="${esc(raw(rate))}" title="while computing: ` +
        `${esc(sig(w.speed))} tasks/s">${sig(rate)}</td>` +
        `<td data-col="chunk">${raw(w.chunk) || "–"}</td>` +
        `<td>${w.mean_chunk ? sig(w.mean_chunk) : "–"}</td>` +
        `<td data-col="depth">${w.depth} / ${w.depth_limit === null ? "–" : w.depth_limit}</td>` +
        `<td>${w.busy_s.toFixed(2)}</td><td>${w.idle_s.toFixed(2)}</td></tr>`;
    });
    return `<div class="scroll"><table class="workers"><tr>${head.map((x, i) =>
      `<th${i === 1 || i === 2 ? ' class="l"' : ""}>${x}</th>`).join("")}</tr>` +
      rows.join("") + `</table></div>`;
  }
  function farmBody(src) {
    const s = src.latest, d = src.derived, hist = src.history;
    const total = d.total, alive = s.workers.filter((w) => w.alive).length;
    let out = `<div class="tiles">` +
      tile("done", "done", num(s.done), s.done) +
      tile("in_flight", "in flight", num(s.in_flight), s.in_flight) +
      tile("left", "left", s.left === null ? "?" : num(s.left), s.left) +
      tile("rate", "tasks / s", sig(d.rate), d.rate) +
      tile("eta", "ETA", s.finished ? "done" : hms(d.eta_s), d.eta_s) +
      tile("elapsed", "elapsed", hms(s.elapsed_s), s.elapsed_s) +
      tile("workers", "workers alive", `${alive} / ${s.workers.length}`, alive,
        alive < s.workers.length) +
      tile("failures", "failed attempts", num(s.failures), s.failures, s.failures > 0) +
      tile("duplicates", "straggler copies", num(s.duplicates), s.duplicates) +
      tile("quarantined", "quarantined", num(s.quarantined), s.quarantined,
        s.quarantined > 0) + `</div>`;
    if (total) {
      const pd = 100 * s.done / total, pf = 100 * s.in_flight / total;
      out += `<div class="bar" title="${num(s.done)} of ${num(total)}"><div class="done" ` +
        `style="width:${pd}%"></div><div class="flight" style="width:${pf}%"></div></div>`;
    }
    if (s.quarantined) {
      out += `<h3>Quarantined tasks</h3><ul class="q">` +
        s.quarantine.map((q) => `<li>${esc(q)}</li>`).join("") + `</ul>`;
    }
    out += `<div class="grid2"><div class="panel"><h3>Progress</h3>` +
      lineChart([{name: "done", color: pal(0), pts: hist.map((p) => [p.t, p.done])},
        {name: "in flight", color: pal(2), pts: hist.map((p) => [p.t, p.in_flight])}],
      "elapsed", "tasks") + `</div><div class="panel"><h3>Rate (tasks / s)</h3>` +
      lineChart([{name: "tasks/s", color: pal(1), pts: hist.map((p) => [p.t, p.rate])}],
        "elapsed", "tasks/s") + `</div>` +
      `<div class="panel"><h3>Workers: busy fraction over time</h3>` +
      utilisation(hist, s.workers.map((w) => w.rank)) + `</div>` + `<div class="panel"><h3>Links: ` +
      `${esc(s.links ? s.links.what : "master-worker round trip")} (forecast)</h3>` +
      (s.links ? heatMatrix(s.links.latency_s, s.links.ranks.map((r) => "r" + r),
        s.links.cols.map((r) => "r" + r), secs, "rtt", s.links.method, "round-trip time",
        "Each cell: the forecast time from the master sending a chunk to a worker to its " +
        "answer, less the worker's time on the chunk (network plus both sides' polling).") :
        `<p class="note">measured once chunks come back</p>`) + `</div></div>`;
    out += `<h3>Workers</h3>` + workerTable(s.workers, d.worker_rates) +
      `<p class="note">tasks/s: task runs finished per second over the same window as the ` +
      `total (at least 5 s and 4 chunks; over the whole run once it ended), so they add up ` +
      `to the total's rate plus straggler copies and retries. Hover for the worker's speed ` +
      `while it computes.</p>`;
    if (s.rounds.length) {
      out += `<h3>Active rounds</h3><table><tr><th class="l">round</th><th>done</th>` +
        `<th>total</th></tr>` + s.rounds.map((r) => `<tr><td class="l">${esc(r.name)}</td>` +
        `<td>${num(r.done)}</td><td>${r.total === null ? "?" : num(r.total)}</td></tr>`)
          .join("") + `</table>`;
    }
    if (s.pipeline_factor !== null) {
      out += `<p class="note">pipeline lead factor ${s.pipeline_factor}</p>`;
    }
    return out;
  }

  // ------------------------------------------------------------------ domain
  function cutsChart(hist, nz) {
    if (!hist.length) return `<p class="note">no data yet</p>`;
    const w = 520, h = 200, p = hist.length;
    const t0 = hist[0].t, t1 = Math.max(hist[p - 1].t, t0 + 1e-9);
    const f = frame(w, h, t0, t1, 0, nz, "elapsed", "plane", (v) => v.toFixed(0));
    let s = "";
    const nr = hist[p - 1].cuts.length - 1;
    for (let r = 0; r < nr; r++) {   // rank r's slab: between cut r and cut r+1, as steps
      const top = [], bot = [];
      hist.forEach((q, i) => {
        const xa = f.sx(q.t), xb = f.sx(i + 1 < p ? hist[i + 1].t : q.t);
        top.push(`${xa.toFixed(1)},${f.sy(q.cuts[r + 1]).toFixed(1)}`,
          `${xb.toFixed(1)},${f.sy(q.cuts[r + 1]).toFixed(1)}`);
        bot.push(`${xa.toFixed(1)},${f.sy(q.cuts[r]).toFixed(1)}`,
          `${xb.toFixed(1)},${f.sy(q.cuts[r]).toFixed(1)}`);
      });
      s += `<polygon fill="${pal(r)}" fill-opacity="0.55" stroke="${pal(r)}" ` +
        `points="${top.concat(bot.reverse()).join(" ")}"><title>rank ${r}</title></polygon>`;
    }
    return `<svg viewBox="0 0 ${w} ${h}" width="${w}" height="${h}">${f.s}${s}</svg>`;
  }
  function domainTable(s) {
    const nr = s.cuts.length - 1;
    let rows = "";
    for (let r = 0; r < nr; r++) {
      rows += `<tr data-rank="${r}"><td><span class="state" style="background:${pal(r)}">` +
        `</span>${r}</td><td>${s.cuts[r]}–${s.cuts[r + 1]}</td>` +
        `<td data-col="planes">${s.cuts[r + 1] - s.cuts[r]}</td>` +
        `<td data-col="speed">${sig(s.speeds[r])}</td></tr>`;
    }
    return `<table><tr><th>rank</th><th>planes</th><th>count</th><th>speed ` +
      `(cost / s)</th></tr>${rows}</table>`;
  }
  function domainBody(src) {
    const s = src.latest, d = src.derived, hist = src.history;
    const nr = s.cuts.length - 1;
    let out = `<div class="tiles">` + tile("step", "step", num(s.step), s.step) +
      tile("rate", "steps / s", sig(d.rate), d.rate) +
      tile("step_s", "compute / step (r0)", secs(s.step_s), s.step_s) +
      tile("moves", "boundary moves", num(s.moves), s.moves) +
      tile("ranks", "ranks", num(nr), nr) +
      tile("elapsed", "elapsed", hms(s.elapsed_s), s.elapsed_s) + `</div>`;
    const speeds = [];
    for (let r = 0; r < nr; r++) {
      speeds.push({name: "r" + r, color: pal(r), pts: hist.map((p) => [p.t, p.speeds[r]])});
    }
    out += `<div class="grid2"><div class="panel"><h3>Slab cuts over time ` +
      `(grid ${s.shape.join(" × ")})</h3>` + cutsChart(hist, s.shape[0]) + `</div>` +
      `<div class="panel"><h3>Rank speeds (forecast, plane cost per compute second)</h3>` +
      lineChart(speeds, "elapsed", "speed") + `</div>`;
    if (s.links) {
      const lab = s.links.ranks.map((r) => "r" + r), cl = s.links.cols.map((r) => "r" + r);
      out += `<div class="panel"><h3>Link latency (forecast)</h3>` +
        heatMatrix(s.links.latency_s, lab, cl, secs, "latency", s.links.method,
          "one-way latency", "Each cell: the forecast one-way latency between two ranks " +
          "(the fixed cost of a message, from the monitor's ping-pong probes).") + `</div>`;
      if (s.links.bandwidth.length) {
        out += `<div class="panel"><h3>Link bandwidth (forecast)</h3>` +
          heatMatrix(s.links.bandwidth, lab, cl, (v) => sig(v) + "B/s", "bandwidth", null,
            "bandwidth", "Each cell: the forecast bandwidth between two ranks, " +
            "bytes per second, from the monitor's probes.") + `</div>`;
      }
    } else {
      out += `<div class="panel" data-links="none"><h3>Links</h3><p class="note">Not ` +
        `probed in this job: the domain's own monitor measures rank speeds only. Give it ` +
        `one that probes links, <code>SlabDomain(..., monitor=OnlineMonitor(comm))</code>, ` +
        `for latency and bandwidth heat maps (probes within 1 % of the run time).</p></div>`;
    }
    return out + `</div><h3>Ranks</h3>` + domainTable(s);
  }

  // ------------------------------------------------------------------ page
  function render() {
    const main = document.getElementById("sources");
    if (!sources.size) {   // a state came and no job is in it yet
      if (meta) main.innerHTML = `<p class="empty">No job has published yet.</p>`;
      return;
    }
    const stale = !inline && Date.now() - lastSeen > 10000;
    main.innerHTML = [...sources.values()].map((src) => {
      const st = src.finished ? "finished" : (stale ? "stale" : "running");
      const body = src.kind === "farm" ? farmBody(src) : domainBody(src);
      return `<section class="source" data-source="${src.id}" data-kind="${src.kind}" ` +
        `data-finished="${src.finished}"><h2>${esc(src.name)} <span class="badge ${st}">` +
        `${st}</span></h2>${body}</section>`;
    }).join("");
  }
  function absorb(state) {
    meta = state;
    for (const v of state.sources) {
      let src = sources.get(v.id);
      if (!src) { src = {history: []}; sources.set(v.id, src); }
      Object.assign(src, {id: v.id, kind: v.kind, name: v.name, finished: v.finished,
        latest: v.latest, derived: v.derived});
      src.history.push(...v.history);
      if (src.history.length > 4000) src.history = src.history.filter((_, i) => i % 2 === 0 ||
        i === src.history.length - 1);
    }
    seq = state.seq;
    lastSeen = Date.now();
    const when = new Date(state.now * 1000).toLocaleTimeString();
    document.getElementById("meta").textContent = inline ?
      `report of ${state.host} pid ${state.pid}, written ${when}` :
      `${state.host} pid ${state.pid} · updated ${when}`;
    render();
  }
  async function poll() {
    try {
      const headers = token ? {Authorization: "Bearer " + token} : {};
      const r = await fetch(`api/state?since=${seq}`, {headers, cache: "no-store"});
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      absorb(await r.json());
      failures = 0;
    } catch (e) {
      failures += 1;
      document.getElementById("meta").textContent =
        `job not answering (${e.message}); it may have ended` +
        (meta ? ` · last update ${new Date(meta.now * 1000).toLocaleTimeString()}` : "");
      render();
    }
    setTimeout(poll, POLL_MS * Math.min(10, 1 + failures));
  }
  if (inline) {
    document.querySelector("footer").textContent = "Static report written by the job at its end.";
    absorb(JSON.parse(inline.textContent));
  } else {
    if (initial) absorb(JSON.parse(initial.textContent));   // first paint: no request
    poll();                                                  // then what is newer, at once
  }
})();
