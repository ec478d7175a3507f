// SPDX-License-Identifier: MIT
// The status page: reads /v1/nodes, /v1/jobs and /v1/goodput and renders them. Every
// string from the API goes into the page as text (textContent), never as markup, so a
// job's reason or a node's label cannot inject anything. With --auth, the token the
// user pastes stays in this tab's sessionStorage and goes out as a Bearer header.
"use strict";

const BUCKETS = ["productive", "checkpoint", "queueing", "startup", "lost_work", "detection",
                 "restart", "hang", "preemption"];
const TOKEN_KEY = "axctl-token";
const REFRESH_MS = 5000;

function $(id) { return document.getElementById(id); }

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

// A token handed over in the fragment (#token=...) is taken and removed from the address
// at once; the fragment never reaches the server.
function takeFragmentToken() {
  const m = /^#token=([A-Za-z0-9_.~+\/=-]+)$/.exec(location.hash);
  if (!m) return;
  sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
  history.replaceState(null, "", location.pathname + location.search);
}

class AuthNeeded extends Error {}

async function get(path) {
  const headers = {"Accept": "application/json"};
  if (token()) headers["Authorization"] = "Bearer " + token();
  const r = await fetch(path, {headers, cache: "no-store", credentials: "omit"});
  if (r.status === 401) throw new AuthNeeded();
  const body = await r.json().catch(() => null);
  if (!r.ok) {
    const msg = body && body.error ? body.error.message : "HTTP " + r.status;
    throw new Error(path + ": " + msg);
  }
  return body;
}

function percent(ratio) {
  return typeof ratio === "number" ? (ratio * 100).toFixed(1) + " %" : "–";
}

function duration(s) {
  if (typeof s !== "number") return "–";
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}

function bucketClass(b) { return "b-" + (BUCKETS.includes(b) ? b : "unknown"); }

function stateCell(state) { return el("td", state, "state-" + String(state).replace(/[^a-z_]/g, "")); }

function fill(tbody, rows) { tbody.replaceChildren(...rows); }

function renderLegend() {
  $("legend").replaceChildren(...BUCKETS.map(b => el("span", b.replace("_", " "), bucketClass(b))));
}

function renderFleet(report) {
  const f = report.fleet;
  const figures = [
    ["Goodput", percent(f.ratio)],
    ["Allocated", duration(f.allocated_s) + " (accelerator time)"],
    ["Lost to failures", duration(f.seconds.lost_work + f.seconds.detection + f.seconds.restart + f.seconds.hang)],
    ["Interruptions", String(f.interruptions)],
  ];
  $("fleet").replaceChildren(...figures.map(([k, v]) => {
    const d = el("div", null, "figure");
    d.append(el("b", v), el("span", k));
    return d;
  }));
}

function acceleratorKinds(node) {
  const kinds = {};
  const acc = node.inventory && Array.isArray(node.inventory.accelerators) ? node.inventory.accelerators : [];
  for (const a of acc) kinds[a.kind || "unknown"] = (kinds[a.kind || "unknown"] || 0) + 1;
  return kinds;
}

function renderNodes(nodes) {
  // Nodes by accelerator kind (rows) and state (columns).
  const states = [...new Set(nodes.map(n => n.state))].sort();
  const byKind = {};
  for (const n of nodes) {
    const kinds = Object.keys(acceleratorKinds(n));
    for (const k of kinds.length ? kinds : ["cpu only"]) {
      byKind[k] = byKind[k] || {};
      byKind[k][n.state] = (byKind[k][n.state] || 0) + 1;
    }
  }
  const head = el("tr");
  head.append(el("th", "Accelerator"), ...states.map(s => el("th", s, "num")));
  $("node-summary").tHead.replaceChildren(head);
  fill($("node-summary").tBodies[0], Object.keys(byKind).sort().map(k => {
    const tr = el("tr");
    tr.append(el("td", k), ...states.map(s => el("td", byKind[k][s] || 0, "num")));
    return tr;
  }));
  fill($("nodes").tBodies[0], nodes.map(n => {
    const tr = el("tr");
    tr.dataset.node = n.name;
    const kinds = acceleratorKinds(n);
    const free = n.free && n.free.accelerators ? n.free.accelerators : {};
    tr.append(el("td", n.name), stateCell(n.state),
              el("td", Object.entries(kinds).map(([k, c]) => c + " × " + k).join(", ") || "–"),
              el("td", Object.entries(free).map(([k, c]) => c + " " + k).join(", ") || "–"),
              el("td", n.reason));
    return tr;
  }));
}

function timeline(segments) {
  const div = el("div", null, "timeline");
  const total = segments.reduce((s, x) => s + x.seconds, 0);
  for (const s of segments) {
    const span = el("span", null, bucketClass(s.bucket));
    span.style.flexGrow = String(total > 0 ? s.seconds / total : 0);
    span.title = s.bucket + ", attempt " + s.attempt + ": " + duration(s.seconds);
    span.dataset.bucket = s.bucket;
    div.append(span);
  }
  return div;
}

function renderJobs(jobs, report) {
  const waiting = jobs.filter(j => j.state === "pending" || j.state === "preempted");
  fill($("queue").tBodies[0], waiting.map(j => {
    const tr = el("tr");
    tr.dataset.jobId = j.id;
    tr.append(el("td", j.id, "num"), el("td", j.name), el("td", j.project), el("td", j.user),
              stateCell(j.state), el("td", j.reason), el("td", j.created_at));
    return tr;
  }));
  const timelines = new Map(report.jobs.map(j => [j.id, j.timeline || []]));
  fill($("jobs").tBodies[0], jobs.filter(j => !waiting.includes(j)).map(j => {
    const tr = el("tr");
    tr.dataset.jobId = j.id;
    const g = el("td", percent(j.goodput ? j.goodput.ratio : null), "num goodput");
    const t = el("td");
    t.append(timeline(timelines.get(j.id) || []));
    tr.append(el("td", j.id, "num"), el("td", j.name), el("td", j.project), stateCell(j.state),
              el("td", j.attempt, "num"), g, t, el("td", j.reason));
    return tr;
  }));
}

function showError(text) {
  $("error").hidden = !text;
  $("error").textContent = text || "";
}

async function refresh() {
  try {
    const [nodes, jobs, report] = await Promise.all(
      [get("/v1/nodes"), get("/v1/jobs?limit=200"), get("/v1/goodput?timeline=1")]);
    renderFleet(report);
    renderNodes(nodes.nodes);
    renderJobs(jobs.jobs, report);
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
    $("token-form").hidden = true;
    $("forget").hidden = !token();
    showError("");
  } catch (e) {
    if (e instanceof AuthNeeded) {
      $("token-form").hidden = false;
      showError(token() ? "The token was refused." : "This controller needs an API token.");
    } else {
      showError(String(e.message || e));
    }
  }
}

$("token-form").addEventListener("submit", ev => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
  $("token").value = "";
  refresh();
});
$("forget").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});

takeFragmentToken();
renderLegend();
refresh();
setInterval(refresh, REFRESH_MS);
