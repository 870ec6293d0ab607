// dais console: renders the cluster state and live figures pushed by `dais console` as
// server-sent events (/api/stream), and sends the operator's actions (/api/actions) with the
// bearer token given in the page. Every value from the cluster goes into the page as text
// (textContent), never as markup. No framework, no build step.
"use strict";

const view = { state: null, metrics: null, me: null, updated: 0 };

// el("div", {class: "x"}, child, "text", ...): an element with attributes and children.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") e.addEventListener("click", v);
    else if (k === "style") e.style.cssText = v;  // CSSOM: allowed by the page's CSP
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
const $ = (id) => document.getElementById(id);
function fill(id, ...children) { $(id).replaceChildren(...children.flat()); }
function table(headers, rows) {
  return el("table", {}, el("tr", {}, headers.map((h) => el("th", {}, h))),
            rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c)))));
}
const fmt = (v, digits = 1) => (v === null || v === undefined || Number.isNaN(v)) ? "–"
    : Number(v).toFixed(digits);
const when = (ms) => new Date(ms).toISOString().replace("T", " ").slice(0, 19);

// ---- pages -------------------------------------------------------------------------------
function showPage() {
  const page = (location.hash || "#cluster").slice(1);
  for (const s of document.querySelectorAll(".page")) {
    s.classList.toggle("shown", s.id === "page-" + page);
  }
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("active", a.getAttribute("href") === "#" + page);
  }
}

// GPU share per node and GPU from the assignments: {node: {gpu: [[deployment, milli], ...]}}.
function gpuUse(assignments) {
  const use = {};
  for (const a of assignments) {
    for (const g of a.gpus || []) {
      const milli = a.gpu_milli > 0 ? a.gpu_milli : 1000;
      ((use[a.node] ||= {})[g] ||= []).push([a.deployment || a.model, milli]);
    }
  }
  return use;
}

// Stranded GPU share: the free part of GPUs that are partly used (a whole-GPU instance cannot
// use it), in GPUs.
function fragmentation(node, use) {
  let f = 0;
  (node.gpus || []).forEach((_, i) => {
    const used = (use[i] || []).reduce((s, [, m]) => s + m, 0);
    if (used > 0 && used < 1000) f += (1000 - used) / 1000;
  });
  return f;
}

function renderCluster(s) {
  const use = gpuUse(s.assignments);
  const ready = s.instances.filter((i) => i.state === "READY").length;
  const pending = s.deployments.reduce((n, d) => n + ((d.status && d.status.pending) || 0), 0);
  const gpus = s.nodes.reduce((n, x) => n + (x.gpus || []).length, 0);
  const frag = s.nodes.reduce((f, n) => f + fragmentation(n, use[n.node] || {}), 0);
  const card = (n, l, id) => el("div", { class: "card", id }, el("div", { class: "n" }, n),
                                el("div", { class: "l" }, l));
  fill("summary", card(s.nodes.length, "nodes", "sum-nodes"),
       card(s.deployments.length, "deployments", "sum-deployments"),
       card(ready + " / " + s.instances.length, "instances ready", "sum-ready"),
       card(pending, "replicas pending", "sum-pending"), card(gpus, "GPUs", "sum-gpus"),
       card(fmt(frag, 2), "GPUs stranded (fragmentation)", "sum-frag"));
  const filter = $("node-filter").value.trim().toLowerCase();
  const byNode = {};
  for (const i of s.instances) (byNode[i.node] ||= []).push(i);
  const shown = s.nodes.filter((n) => !filter || JSON.stringify([n.node, n.labels || {}])
      .toLowerCase().includes(filter));
  fill("nodes", shown.slice(0, 2000).map((n) => nodeCard(n, use[n.node] || {},
                                                           byNode[n.node] || [])));
}

function nodeCard(n, use, instances) {
  const sched = n.scheduling || "enabled";
  const labels = Object.entries(n.labels || {}).map(([k, v]) => k + "=" + v).join(" ");
  const gpus = (n.gpus || []).map((g, i) => {
    const parts = use[i] || [];
    const used = parts.reduce((s, [, m]) => s + m, 0);
    const memory = g.memory_mib ? ` ${fmt(g.memory_mib / 1024, 0)} GiB` : "";
    return el("div", { class: "gpu" },
              el("div", {}, `GPU ${i} ${g.model || ""}${memory} · ${fmt(used / 10, 0)} % · `,
                 parts.map(([d, m]) => `${d} (${m / 10} %)`).join(", ") || "free"),
              el("div", { class: "bar" }, parts.map(([, m], j) =>
                  el("span", { class: j % 2 ? "alt" : "", style: `width:${m / 10}%` }))));
  });
  const actions = ["cordon", "uncordon", "drain"].map((a) =>
      el("button", { "data-action": a, "data-target": n.node, disabled: !isAdmin(),
                     onclick: () => act(a, n.node) }, a));
  return el("div", { class: "node" + (sched === "enabled" ? "" : " cordoned"), "data-node": n.node },
            el("div", { class: "name" }, n.node), el("div", { class: "meta" }, sched, " · ",
            `${n.cpu_milli || 0} mCPU · ${n.memory_mib || 0} MiB`, labels ? " · " + labels : "",
            (n.gpus || []).length ? ` · stranded ${fmt(fragmentation(n, use), 2)} GPU` : ""),
            gpus, el("div", { class: "meta" }, instances.map((i) =>
                el("span", { class: "state-" + i.state }, `${i.model} v${i.version} ${i.state}  `))),
            el("div", {}, actions));
}

function renderDeployments(s) {
  fill("deployments", table(["name", "model", "version", "replicas", "assigned", "pending",
                             "reason"], s.deployments.map((d) => {
    const st = d.status || {};
    return [d.name, d.model, d.version ?? (st.version >= 0 ? st.version + " (latest)" : "latest"),
            d.replicas, st.assigned ?? "?",
            el("span", { class: st.pending ? "state-pending" : "" }, st.pending ?? "?"),
            st.reason || ""];
  })));
  fill("instances", table(["node", "model", "version", "state", "GPUs", "reason"],
                          s.instances.map((i) => [i.node, i.model, i.version,
                            el("span", { class: "state-" + i.state }, i.state),
                            (i.gpus || []).join(","), i.reason || ""])));
}

function renderRoutes(s) {
  fill("routes", table(["route", "model", "versions (weight)", "stable", "sticky", "A/B rules"],
                       s.routes.map((r) => [r.name, r.model, el("div", {},
      (r.versions || []).map((v) => el("div", {}, `v${v.version}: ${v.weight} %`,
          el("div", { class: "bar" }, el("span", { style: `width:${v.weight}%` }))))),
      r.stable ?? "", r.sticky_header || "",
      (r.match || []).map((m) => JSON.stringify(m)).join("\n")])));
}

// ---- plots -------------------------------------------------------------------------------
// A line plot of [[t, value], ...] series as SVG: axes scaled to the data, a legend.
function plot(title, series, unit) {
  const W = 320, H = 140, L = 40, B = 18;
  const all = series.flatMap((s) => s.points.filter((p) => p[1] !== null));
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const add = (tag, attrs, text) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
  };
  add("line", { x1: L, y1: H - B, x2: W, y2: H - B, stroke: "#ccc" });
  if (all.length) {
    const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]));
    const top = Math.max(...all.map((p) => p[1])) * 1.1 || 1;
    const x = (t) => L + (t1 > t0 ? (t - t0) / (t1 - t0) : 1) * (W - L - 4);
    const y = (v) => H - B - (v / top) * (H - B - 6);
    add("text", { x: 2, y: 12 }, fmt(top, top < 10 ? 2 : 0) + unit);
    add("text", { x: 2, y: H - B }, "0");
    add("text", { x: L, y: H - 4 }, when(t0).slice(11));
    add("text", { x: W - 46, y: H - 4 }, when(t1).slice(11));
    for (const s of series) {
      const pts = s.points.filter((p) => p[1] !== null).map((p) => `${x(p[0])},${y(p[1])}`);
      if (pts.length) add("polyline", { points: pts.join(" "), fill: "none", stroke: s.color,
                                        "stroke-width": 1.5, "data-series": s.name });
    }
  } else {
    add("text", { x: L + 10, y: H / 2 }, "no requests yet");
  }
  return el("div", { class: "plot", "data-plot": title }, el("div", { class: "title" }, title), svg,
            el("div", { class: "legend" }, series.map((s) =>
                el("span", { class: s.cls }, "— " + s.name))));
}

function seriesOf(route, version) {
  const m = view.metrics;
  const s = m && m.series.find((x) => x.route === route && String(x.version) === String(version));
  return s ? s.points : [];
}

function rolloutPlots(r) {
  const stable = seriesOf(r.route, r.from), canary = seriesOf(r.route, r.to);
  const pick = (pts, i) => pts.map((p) => [p[0], p[i]]);
  const two = (i) => [{ name: "stable v" + r.from, color: "#2f6fdb", cls: "stable", points: pick(stable, i) },
                      { name: "canary v" + r.to, color: "#e0702a", cls: "canary", points: pick(canary, i) }];
  const pct = (pts) => pts.map((p) => [p[0], p[1] === null ? null : p[1] * 100]);
  const err = two(2).map((s) => ({ ...s, points: pct(s.points) }));
  return el("div", { class: "plots", "data-plots": r.route }, plot("p50 latency", two(3), " ms"),
            plot("p99 latency", two(4), " ms"), plot("error rate", err, " %"),
            plot("requests/s", two(1), "/s"));
}

function renderRollouts(s) {
  if (!s.rollouts.length) return fill("rollouts", el("p", { class: "muted" }, "No rollouts."));
  fill("rollouts", s.rollouts.map((r) => {
    const weight = (r.steps || [])[r.step];
    const running = r.state === "running" || r.state === "paused";
    const button = (a, enabled) => el("button", { "data-action": a, "data-target": r.route,
        disabled: !(enabled && isAdmin()), onclick: () => act(a, r.route) }, a);
    return el("div", { class: "rollout", "data-route": r.route },
      el("div", { class: "head" }, el("b", {}, `${r.route}: v${r.from} → v${r.to}`),
         el("span", { class: "rollout-state state-" + r.state }, r.state),
         `step ${r.step + 1} of ${(r.steps || []).length} (${weight} % canary)`,
         button("pause", r.state === "running"), button("resume", r.state === "paused"),
         button("promote", running), button("rollback", running || r.state === "promoted")),
      r.reason ? el("div", { class: "muted" }, r.reason) : null,
      rolloutPlots(r),
      table(["step", "weight", "requests", "errors", "p99 ms", "PSI", "decision", "time"],
            (r.history || []).map((h) => [h.step + 1, h.weight + " %", h.requests,
              fmt(h.error_rate * 100, 2) + " %", fmt(h.p99_ms), h.psi >= 0 ? fmt(h.psi, 3) : "–",
              h.decision, h.time_ms ? when(h.time_ms) : ""])));
  }));
}

function renderEvents(s) {
  const kinds = [...new Set(s.events.map((e) => e.kind))].sort();
  const select = $("event-kind"), chosen = select.value;
  select.replaceChildren(el("option", { value: "" }, "every kind"),
                         kinds.map((k) => el("option", { value: k }, k)));
  select.value = kinds.includes(chosen) ? chosen : "";
  const text = $("event-filter").value.trim().toLowerCase();
  const shown = s.events.filter((e) => (!select.value || e.kind === select.value) &&
      (!text || JSON.stringify(e).toLowerCase().includes(text))).reverse();
  fill("events", table(["time", "kind", "deployment", "node", "message", "by"],
                       shown.map((e) => [when(e.time_ms), e.kind, e.deployment || "",
                                         e.node || "", e.message, e.scheduler || ""])));
}

function renderHealth() {
  const m = view.metrics;
  if (!m) return;
  const alerts = m.alerts || [];
  $("alert-count").textContent = alerts.length ? String(alerts.length) : "";
  fill("alerts", alerts.length ? alerts.map((a) => el("div", { class: "alert " + a.severity },
      el("b", {}, a.severity + " " + a.name + ": "), a.text))
      : el("p", { class: "ok" }, "No alert fires."));
  const miss = m.features.miss_ratio;
  fill("health", table(["what", "value"], [
    ["figures from", m.source === "prometheus" ? "Prometheus (--prometheus)" : "the gateways' and nodes' /metrics"],
    ["feature miss ratio", miss === null ? "no feature lookups" : fmt(miss * 100, 2) + " %"],
    ["feature values returned", fmt(m.features.values, 0)],
    ["Redis", m.redis_reachable === null ? "not used" : m.redis_reachable ? el("span", { class: "ok" }, "reachable")
                                                                          : el("span", { class: "bad" }, "unreachable")],
    ["transactions in doubt", fmt(m.txn.in_doubt, 0) + (m.txn.in_doubt ? `, oldest ${fmt(m.txn.oldest_age_s, 0)} s` : "")],
    ["/metrics targets answering", m.targets_up],
    ["targets not answering", (m.targets_down || []).join(", ") || "none"]]));
}

function render() {
  const s = view.state;
  if (!s || !s.nodes) return;
  renderCluster(s);
  renderDeployments(s);
  renderRoutes(s);
  renderRollouts(s);
  renderEvents(s);
  renderHealth();
}

// ---- live updates ------------------------------------------------------------------------
function connect() {
  const live = $("live");
  const stream = new EventSource("api/stream");
  const stamp = () => {
    view.updated = Date.now();
    live.className = "live on";
    live.textContent = "live · " + new Date().toLocaleTimeString();
  };
  stream.addEventListener("state", (e) => { view.state = JSON.parse(e.data); stamp(); render(); });
  stream.addEventListener("metrics", (e) => {
    view.metrics = JSON.parse(e.data);
    stamp();
    // Only the plots are redrawn: the buttons stay where the operator's pointer is.
    for (const r of (view.state && view.state.rollouts) || []) {
      const old = document.querySelector(`[data-plots="${CSS.escape(r.route)}"]`);
      if (old) old.replaceWith(rolloutPlots(r));
    }
    renderHealth();
  });
  stream.onerror = () => { live.className = "live off"; live.textContent = "reconnecting…"; };
}

// ---- actions -----------------------------------------------------------------------------
const isAdmin = () => Boolean(view.me && view.me.admin);

function toast(text, error) {
  const t = el("div", { class: error ? "error" : "" }, text);
  $("toast").append(t);
  setTimeout(() => t.remove(), 6000);
}

async function whoami() {
  const token = sessionStorage.getItem("dais-token");
  view.me = null;
  if (token) {
    const r = await fetch("api/whoami", { headers: { Authorization: "Bearer " + token } });
    const body = await r.json();
    if (r.ok) view.me = body; else toast(body.error, true);
  }
  $("whoami").textContent = view.me ? `${view.me.subject} (${view.me.admin ? "admin" : "read-only"})` : "";
  render();
}

async function act(action, target) {
  const token = sessionStorage.getItem("dais-token") || "";
  const r = await fetch("api/actions", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + token },
    body: JSON.stringify({ action, target }),
  });
  const body = await r.json();
  toast(r.ok ? body.message : `${action} ${target}: ${body.error}`, !r.ok);
}

document.addEventListener("DOMContentLoaded", () => {
  window.addEventListener("hashchange", showPage);
  showPage();
  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem("dais-token", $("token").value.trim());
    $("token").value = "";
    whoami();
  });
  for (const id of ["node-filter", "event-filter", "event-kind"]) {
    $(id).addEventListener("input", render);
  }
  connect();
  whoami();
});
