// The gateway's debug page: polls /debug/tpsroute/history and redraws the
// tables and their sparklines in place. Plain DOM, no dependencies.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const W = 120, H = 28;

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// sparkline draws values (null = no data) as an inline SVG polyline scaled
// to [0, max]; runs separated by nulls become separate polylines.
function sparkline(cls, values, max) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "sparkline " + cls);
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const n = values.length;
  if (!(max > 0)) max = 1;
  let pts = [];
  const flush = () => {
    if (pts.length === 1) pts.push(pts[0].replace(/^([\d.]+)/, (x) => String(Number(x) + 1)));
    if (pts.length > 0) {
      const p = document.createElementNS(SVG, "polyline");
      p.setAttribute("points", pts.join(" "));
      svg.appendChild(p);
    }
    pts = [];
  };
  values.forEach((v, i) => {
    if (v === null || v === undefined) { flush(); return; }
    const x = n > 1 ? (i * (W - 2)) / (n - 1) + 1 : W / 2;
    const y = H - 2 - (Math.min(v, max) / max) * (H - 4);
    pts.push(x.toFixed(1) + "," + y.toFixed(1));
  });
  flush();
  return svg;
}

function last(values) {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null) return values[i];
  return null;
}

function fmt(v, unit, digits) {
  if (v === null || v === undefined || !(v > 0)) return "–";
  return v.toFixed(digits) + unit;
}

function sparkCell(cls, values, max, label) {
  const td = el("td", { class: "spark " + cls });
  td.appendChild(sparkline(cls, values || [], max));
  td.appendChild(el("span", {}, label));
  return td;
}

function maxOf(rows, field) {
  let m = 0;
  for (const r of rows) for (const v of r[field] || []) if (v > m) m = v;
  return m;
}

function render(data) {
  const rows = data.deployments || [];
  const ttftMax = maxOf(rows, "ttft_s"), tpsMax = maxOf(rows, "tps");
  const body = document.createElement("tbody");
  for (const r of rows) {
    const tr = el("tr", { "data-deployment": r.deployment });
    tr.appendChild(el("td", {}, r.deployment));
    tr.appendChild(sparkCell("share", r.share, 1, fmt(r.share_total * 100, "%", 1)));
    tr.appendChild(sparkCell("ttft", r.ttft_s, ttftMax, fmt((last(r.ttft_s || []) || 0) * 1000, " ms", 0)));
    tr.appendChild(sparkCell("tps", r.tps, tpsMax, fmt(last(r.tps || []), " tok/s", 0)));
    tr.appendChild(el("td", { class: "breaker " + r.breaker }, r.breaker + (r.cooling ? " (cooling)" : "")));
    tr.appendChild(el("td", {}, fmt(r.error_rate * 100, "%", 1) === "–" ? "0%" : fmt(r.error_rate * 100, "%", 1)));
    tr.appendChild(el("td", {}, String(r.in_flight)));
    tr.appendChild(el("td", {}, String(r.requests)));
    body.appendChild(tr);
  }
  document.querySelector("#deployments tbody").replaceWith(body);

  const fo = document.createElement("tbody");
  const list = data.failovers || [];
  if (list.length === 0) {
    const tr = el("tr");
    tr.appendChild(el("td", { colspan: 5, class: "muted" }, "none yet"));
    fo.appendChild(tr);
  }
  for (const f of list) {
    const tr = el("tr", { class: "failover" });
    tr.appendChild(el("td", {}, new Date(f.time).toLocaleTimeString()));
    tr.appendChild(el("td", {}, f.deployment));
    tr.appendChild(el("td", {}, f.class));
    tr.appendChild(el("td", {}, f.phase));
    tr.appendChild(el("td", {}, f.status ? String(f.status) : ""));
    fo.appendChild(tr);
  }
  document.querySelector("#failovers tbody").replaceWith(fo);

  const n = rows.length ? (rows[0].share || []).length : 0;
  document.getElementById("status").textContent =
    `${new Date(data.time).toLocaleTimeString()} · up ${data.uptime} · ${rows.length} deployments · last ${Math.round(n * data.interval_s)} s`;
  document.body.setAttribute("data-ready", "1");
}

async function poll() {
  try {
    const resp = await fetch("/debug/tpsroute/history", { cache: "no-store" });
    if (!resp.ok) throw new Error(resp.status + " " + resp.statusText);
    render(await resp.json());
  } catch (e) {
    document.getElementById("status").textContent = "cannot reach the gateway: " + e.message;
  }
}

poll();
setInterval(poll, 2000);
