// The dashboard page (docs/dashboard.md): signs in with an admin key kept in this closure
// only, routes on the URL's hash (#/overview, #/sources, #/spend, #/calls, #/calls/<id>),
// polls the JSON under /admin/dashboard/ and renders tables always and charts when the
// chart library (uPlot, vendored) loaded. Every value from the gateway is put into the
// page as text (textContent), never as HTML: upstream error messages are untrusted.
(function () {
  "use strict";

  let adminKey = null;
  let timer = null;
  const charts = {};
  const POLL_MS = 2000;

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === "class") e.className = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  const fmt = {
    n(v, digits) {
      if (v === null || v === undefined || Number.isNaN(v)) return "–";
      return Number(v).toLocaleString("en-US", { maximumFractionDigits: digits ?? 1 });
    },
    pct(v) { return v === null || v === undefined ? "–" : (v * 100).toFixed(1) + " %"; },
    money(v) { return v === null || v === undefined ? "–" : Number(v).toFixed(v !== 0 && Math.abs(v) < 0.01 ? 6 : 4); },
    time(ms) { return ms ? new Date(ms).toISOString().replace("T", " ").slice(0, 19) + "Z" : "–"; },
    clock(ms) { return new Date(ms).toISOString().slice(11, 19); },
  };

  class HttpError extends Error {
    constructor(status, type, message) { super(message); this.status = status; this.type = type; }
  }

  async function api(path) {
    const resp = await fetch(path, { headers: { authorization: "Bearer " + adminKey }, cache: "no-store" });
    let body = null;
    try { body = await resp.json(); } catch (_) { body = null; }
    if (!resp.ok) {
      const err = (body && body.error) || {};
      throw new HttpError(resp.status, err.type || "error", err.message || resp.statusText);
    }
    return body;
  }

  function status(text, isError) {
    const s = $("status-line");
    s.textContent = text || "";
    s.className = isError ? "error" : "sub";
  }

  function showPage(name) {
    for (const p of document.querySelectorAll(".page")) p.hidden = p.id !== "page-" + name && !(name === "login" && p.id === "login");
    for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === name || (name === "call" && a.dataset.page === "calls"));
  }

  function signOut(message) {
    adminKey = null;
    clearInterval(timer);
    $("nav").hidden = true;
    showPage("login");
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("admin-key").value = "";
  }

  async function signIn(key) {
    adminKey = key;
    try {
      await api("/admin/dashboard/overview");
    } catch (e) {
      adminKey = null;
      $("login-error").textContent = e instanceof HttpError ? e.message : "the gateway cannot be reached: " + e.message;
      return;
    }
    $("login-error").textContent = "";
    $("login").hidden = true;
    $("nav").hidden = false;
    if (!location.hash || location.hash === "#") location.hash = "#/overview";
    route();
  }

  // ---- charts (uPlot when it loaded; the tables below them say the same) ----
  // Axis labels with enough digits for small values (spend per interval is often < 0.01).
  const axisValues = (u, vals) => vals.map((v) => (v === null ? "" : Math.abs(v) < 1 && v !== 0 ? Number(v.toPrecision(2)).toString() : fmt.n(v, 1)));

  function chart(id, seriesDefs, xs, ys) {
    const host = $(id);
    if (typeof window.uPlot !== "function") { host.textContent = "(charts unavailable: the tables below hold the same data)"; return; }
    const data = [xs, ...ys];
    const width = Math.max(300, host.clientWidth || 540);
    if (!charts[id] || charts[id].series.length !== seriesDefs.length + 1) {
      if (charts[id]) charts[id].destroy();
      host.textContent = "";
      charts[id] = new window.uPlot({
        width, height: 200,
        series: [{}, ...seriesDefs.map((s) => ({ label: s.label, stroke: s.color, width: 2, spanGaps: false }))],
        axes: [{}, { size: 70, values: axisValues }],
        scales: { x: { time: true } },
        legend: { live: false },
      }, data, host);
    } else {
      charts[id].setData(data);
    }
  }

  // ---- overview ----
  async function overview() {
    const o = await api("/admin/dashboard/overview");
    const w = o.window;
    const last = o.points.length ? o.points[o.points.length - 1] : w;
    const cards = [
      ["requests/s (now)", fmt.n(last.requests_per_s, 2), "rps"],
      ["error rate (hour)", fmt.pct(w.error_rate), "error-rate"],
      ["latency p50 / p99 ms", fmt.n(w.latency_p50_ms) + " / " + fmt.n(w.latency_p99_ms), "latency"],
      ["TTFT p50 / p99 ms", fmt.n(w.ttft_p50_ms) + " / " + fmt.n(w.ttft_p99_ms), "ttft"],
      ["tokens in / out (hour)", fmt.n(w.prompt_tokens, 0) + " / " + fmt.n(w.completion_tokens, 0), "tokens"],
      ["spend (hour)", fmt.money(w.cost), "spend"],
      ["calls since start", fmt.n(o.requests_total, 0), "total"],
    ];
    $("cards").replaceChildren(...cards.map(([label, value, id]) =>
      el("div", { class: "card", "data-testid": "card-" + id }, el("div", { class: "label" }, label), el("div", { class: "value" }, value))));
    const xs = o.points.map((p) => p.t_ms / 1000);
    const errPerS = o.points.map((p) => (p.seconds > 0 ? Object.values(p.errors).reduce((a, b) => a + b, 0) / p.seconds : 0));
    chart("chart-rps", [{ label: "requests/s", color: "#2f6fde" }, { label: "errors/s", color: "#cf222e" }], xs,
      [o.points.map((p) => p.requests_per_s), errPerS]);
    chart("chart-latency", [
      { label: "p50", color: "#2f6fde" }, { label: "p99", color: "#8250df" },
      { label: "TTFT p50", color: "#1f883d" }, { label: "TTFT p99", color: "#b7791f" }], xs,
      [o.points.map((p) => p.latency_p50_ms), o.points.map((p) => p.latency_p99_ms),
        o.points.map((p) => p.ttft_p50_ms), o.points.map((p) => p.ttft_p99_ms)]);
    chart("chart-tokens", [{ label: "prompt", color: "#2f6fde" }, { label: "completion", color: "#1f883d" }], xs,
      [o.points.map((p) => p.prompt_tokens), o.points.map((p) => p.completion_tokens)]);
    chart("chart-spend", [{ label: "spend", color: "#b7791f" }], xs, [o.points.map((p) => p.cost)]);
    const classes = Object.entries(w.errors).sort((a, b) => b[1] - a[1]);
    $("errors-table").tBodies[0].replaceChildren(...(classes.length ? classes.map(([c, n]) =>
      el("tr", { "data-testid": "error-class-" + c }, el("td", {}, c), el("td", { class: "num" }, fmt.n(n, 0))))
      : [el("tr", {}, el("td", { colspan: 2, class: "sub" }, "no failed calls in the last hour"))]));
    const recent = o.points.slice(-12).reverse();
    $("points-table").tBodies[0].replaceChildren(...recent.map((p) => el("tr", {},
      el("td", {}, fmt.clock(p.t_ms)), el("td", { class: "num" }, fmt.n(p.requests_per_s, 2)),
      el("td", { class: "num" }, fmt.pct(p.error_rate)), el("td", { class: "num" }, fmt.n(p.latency_p50_ms)),
      el("td", { class: "num" }, fmt.n(p.latency_p99_ms)), el("td", { class: "num" }, fmt.n(p.ttft_p50_ms)),
      el("td", { class: "num" }, fmt.n(p.ttft_p99_ms)),
      el("td", { class: "num" }, fmt.n(p.prompt_tokens, 0) + " / " + fmt.n(p.completion_tokens, 0)),
      el("td", { class: "num" }, fmt.money(p.cost)))));
    const scopeSelect = $("f-scope");
    if (scopeSelect.options.length === 1) {
      for (const s of o.scopes) scopeSelect.append(el("option", { value: s }, s));
    }
  }

  // ---- sources ----
  function gate(id, used, limit, unit) {
    if (!limit) return el("span", { class: "gate sub", "data-testid": id }, fmt.n(used, 0) + " (no limit)");
    return el("span", { class: "gate", "data-testid": id },
      el("meter", { min: 0, max: limit, value: Math.min(used, limit), high: limit * 0.8, optimum: 0 }),
      " " + fmt.n(used, 0) + " / " + fmt.n(limit, 0) + (unit ? " " + unit : ""));
  }

  function breakerBadge(src) {
    const state = src.breaker || "none";
    let text = state === "none" ? "n/a" : state;
    if (state === "open" && src.cooldown_remaining_s !== null) text += " · " + Math.ceil(src.cooldown_remaining_s) + " s left";
    return el("span", { class: "badge " + state, "data-testid": "breaker-" + src.name, "data-state": state }, text);
  }

  async function sources() {
    const s = await api("/admin/dashboard/sources");
    $("generation").textContent = "configuration generation " + s.generation + " · telemetry " + s.telemetry.backend + (s.telemetry.degraded ? " (degraded: " + s.telemetry.reason + ")" : "");
    const blocks = Object.entries(s.scopes).map(([name, scope]) => {
      const g = scope.limiter.global;
      const rows = scope.sources.map((src) => {
        const l = src.limiter || { in_flight: src.in_flight, max_concurrency: 0, requests_in_window: 0, rpm: 0, tokens_in_window: 0, tpm: 0 };
        return el("tr", { "data-testid": "source-" + name + "-" + src.name },
          el("td", {}, el("strong", {}, src.name), el("div", { class: "sub" }, src.provider + " · " + src.model)),
          el("td", {}, breakerBadge(src), el("div", { class: "sub" }, fmt.n(src.consecutive_failures, 0) + " consecutive failures")),
          el("td", {}, gate("gate-concurrency-" + src.name, l.in_flight, l.max_concurrency, "in flight")),
          el("td", {}, gate("gate-rpm-" + src.name, l.requests_in_window, l.rpm, "req")),
          el("td", {}, gate("gate-tpm-" + src.name, l.tokens_in_window, l.tpm, "tok")),
          el("td", { class: "num", "data-testid": "pacer-" + src.name }, fmt.n(src.pacer_limit, 0)),
          el("td", { class: "num" }, src.memo_cooldown_s > 0 ? fmt.n(src.memo_cooldown_s) + " s" : "–"),
          el("td", { class: "num" }, fmt.pct(src.success_ewma)),
          el("td", { class: "num" }, fmt.n(src.latency_ewma_ms)),
          el("td", {}, src.plugin, el("div", { class: "sub" }, src.plugin_origin + " · " + src.idle_instances + " idle")),
          el("td", { class: "num", "data-testid": "faults-" + src.name }, fmt.n(src.plugin_faults, 0)));
      });
      return el("div", { class: "scope", "data-testid": "scope-" + name },
        el("h3", {}, name, " ", el("span", { class: "sub" }, "aliases " + scope.aliases.join(", ") + " · scope gate: " + fmt.n(g.in_flight, 0) + " in flight" + (g.max_concurrency ? " of " + g.max_concurrency : "") + " · window " + scope.limiter.window_s + " s")),
        el("table", {}, el("thead", {}, el("tr", {}, ...["source", "breaker", "concurrency", "RPM", "TPM", "AIMD pacer", "cooldown memo", "success", "latency EWMA ms", "plugin", "faults"].map((h) => el("th", {}, h)))),
          el("tbody", {}, ...rows)));
    });
    $("scopes").replaceChildren(...blocks);
  }

  // ---- spend ----
  function spendQuery() {
    const group = $("spend-group").value;
    const range = $("spend-range").value;
    const q = new URLSearchParams({ group_by: group });
    if (range === "custom") {
      if ($("spend-from").value) q.set("from", $("spend-from").value);
      if ($("spend-to").value) q.set("to", $("spend-to").value);
    } else {
      q.set("from", new Date(Date.now() - Number(range) * 3600e3).toISOString().replace(/\.\d+Z$/, "Z"));
    }
    return q;
  }

  async function spend() {
    const s = await api("/admin/dashboard/spend?" + spendQuery());
    $("spend-group-head").textContent = s.group_by;
    $("spend-range-text").textContent = fmt.time(s.from_ms) + " → " + fmt.time(s.to_ms);
    const total = s.lines.reduce((a, l) => a + (l.cost || 0), 0);
    $("spend-table").tBodies[0].replaceChildren(...(s.lines.length ? s.lines.map((l) => el("tr", { "data-testid": "spend-" + (l.group || "none") },
      el("td", {}, l.group || "(none)"), el("td", { class: "num" }, fmt.money(l.cost)),
      el("td", {}, total > 0 ? el("meter", { min: 0, max: 1, value: (l.cost || 0) / total }) : "–"),
      el("td", { class: "num" }, fmt.n(l.prompt_tokens, 0)), el("td", { class: "num" }, fmt.n(l.completion_tokens, 0)),
      el("td", { class: "num" }, fmt.n(l.calls, 0))))
      : [el("tr", {}, el("td", { colspan: 6, class: "sub" }, "no calls in this range"))]));
    const b = s.budgets;
    $("budgets-table").tBodies[0].replaceChildren(...(b === null
      ? [el("tr", {}, el("td", { colspan: 8, class: "sub" }, "virtual keys are off (PGW_VIRTUAL_KEYS): no budgets"))]
      : b.length === 0 ? [el("tr", {}, el("td", { colspan: 8, class: "sub" }, "no key or team has a budget"))]
        : b.map((x) => el("tr", { "data-testid": "budget-" + x.id + "-" + x.period },
          el("td", {}, x.owner), el("td", {}, x.id), el("td", {}, x.name), el("td", {}, x.period),
          el("td", { class: "num" }, fmt.money(x.spent_usd)), el("td", { class: "num" }, fmt.money(x.limit_usd)),
          el("td", {}, el("meter", { min: 0, max: x.limit_usd, value: Math.min(x.spent_usd, x.limit_usd), low: x.soft_limit_usd || undefined, high: x.limit_usd * 0.9 })),
          el("td", {}, x.resets_at_ms ? fmt.time(x.resets_at_ms) : "never")))));
  }

  // ---- calls ----
  function callsQuery() {
    const q = new URLSearchParams();
    for (const [id, name] of [["f-scope", "scope"], ["f-source", "source"], ["f-status", "status"], ["f-key", "key"]]) {
      const v = $(id).value.trim();
      if (v) q.set(name, v);
    }
    q.set("limit", "100");
    return q;
  }

  function statusBadge(s) { return el("span", { class: "badge " + s }, s.replace("_", " ")); }

  async function calls() {
    const r = await api("/admin/dashboard/calls?" + callsQuery());
    $("calls-table").tBodies[0].replaceChildren(...(r.calls.length ? r.calls.map((c) => el("tr", {
      class: "clickable", "data-testid": "call-" + c.call_id, "data-status": c.status,
      onclick: () => { location.hash = "#/calls/" + encodeURIComponent(c.call_id); },
    },
    el("td", {}, fmt.time(c.ended_at_ms)), el("td", {}, statusBadge(c.status)), el("td", {}, c.scope),
    el("td", {}, c.source || "–"), el("td", {}, c.model || "–"), el("td", { class: "num" }, fmt.n(c.attempts, 0)),
    el("td", { class: "num" }, fmt.n(c.total_latency_ms, 0)),
    el("td", { class: "num" }, fmt.n(c.prompt_tokens, 0) + " / " + fmt.n(c.completion_tokens, 0)),
    el("td", { class: "msg" }, c.error_type || ""), el("td", {}, c.key_id || "")))
      : [el("tr", {}, el("td", { colspan: 10, class: "sub" }, "no calls match"))]));
  }

  async function call(id) {
    $("call-id").textContent = id;
    let d;
    try {
      d = await api("/admin/dashboard/calls/" + encodeURIComponent(id));
    } catch (e) {
      if (e instanceof HttpError && e.status === 404) { $("call-summary").replaceChildren(el("dt", {}, "not found"), el("dd", {}, e.message)); $("attempts-table").tBodies[0].replaceChildren(); return; }
      throw e;
    }
    const c = d.call;
    const facts = [["status", statusBadge(c.status)], ["ended", fmt.time(c.ended_at_ms)], ["scope", c.scope], ["model", c.model || "–"],
      ["answered by / last tried", c.source || "–"], ["attempts", fmt.n(c.attempts, 0)], ["latency", fmt.n(c.total_latency_ms, 0) + " ms"],
      ["tokens in / out", fmt.n(c.prompt_tokens, 0) + " / " + fmt.n(c.completion_tokens, 0)], ["cost", fmt.money(d.cost)],
      ["error", c.error_type ? c.error_type + ": " + (c.error || "") : "–"], ["key / team", (c.key_id || "–") + " / " + (c.team_id || "–")], ["ingress", c.ingress || "–"]];
    $("call-summary").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
    $("attempts-table").tBodies[0].replaceChildren(...(d.attempts.length ? d.attempts.map((a) => el("tr", { "data-testid": "attempt-" + a.attempt },
      el("td", { class: "num" }, a.attempt), el("td", {}, fmt.time(a.at_ms)), el("td", {}, a.source || "–"), el("td", {}, a.provider || "–"),
      el("td", {}, a.model_reported || a.model || "–"),
      el("td", {}, a.error_type ? el("span", { class: "badge failure" }, a.error_type) : el("span", { class: "badge success" }, "answered")),
      el("td", { class: "msg" }, a.error || ""), el("td", { class: "num" }, fmt.n(a.latency_ms, 0)), el("td", { class: "num" }, fmt.n(a.ttft_ms)),
      el("td", { class: "num" }, fmt.n(a.prompt_tokens, 0) + " / " + fmt.n(a.completion_tokens, 0)), el("td", { class: "num" }, fmt.money(a.cost))))
      : [el("tr", {}, el("td", { colspan: 11, class: "sub" }, "no upstream attempt (answered from the response cache)"))]));
  }

  // ---- routing and polling ----
  const pages = { overview, sources, spend, calls };

  async function refresh(fn, arg) {
    try {
      await fn(arg);
      status("updated " + new Date().toLocaleTimeString());
    } catch (e) {
      if (e instanceof HttpError && (e.status === 401 || e.status === 403)) { signOut(e.message); return; }
      if (e instanceof HttpError && e.type === "ledger_off") { status(e.message, true); return; }
      status(e.message, true);
    }
  }

  function route() {
    if (!adminKey) { showPage("login"); return; }
    clearInterval(timer);
    const parts = location.hash.replace(/^#\/?/, "").split("/");
    if (parts[0] === "calls" && parts[1]) {
      showPage("call");
      refresh(call, decodeURIComponent(parts.slice(1).join("/")));
      return;
    }
    const name = pages[parts[0]] ? parts[0] : "overview";
    showPage(name);
    refresh(pages[name]);
    if (name === "overview" || name === "sources") timer = setInterval(() => refresh(pages[name]), POLL_MS);
  }

  window.addEventListener("hashchange", route);
  $("login-form").addEventListener("submit", (ev) => { ev.preventDefault(); signIn($("admin-key").value); });
  $("sign-out").addEventListener("click", () => signOut(""));
  $("spend-form").addEventListener("submit", (ev) => { ev.preventDefault(); refresh(spend); });
  $("calls-form").addEventListener("submit", (ev) => { ev.preventDefault(); refresh(calls); });
  showPage("login");
})();
