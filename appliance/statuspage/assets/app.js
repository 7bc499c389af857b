// Outpost status page: polls the box's read-only JSON API (same origin,
// same Basic credentials) and redraws. Every value from the box is put in
// the page as text, never as HTML: user agents and names come from phones.
"use strict";

(function () {
  const FAST_MS = 2000;  // status, registrations, calls
  const SLOW_MS = 10000; // interfaces, CDRs
  const CDR_KEEP = 25;

  // The API's URLs are built from location.origin: the page's own URL may
  // carry credentials (user:pw@box), which fetch refuses.
  const api = (path) => location.origin + "/api/v1/" + path;

  const $ = (id) => document.getElementById(id);

  // el builds an element; children are nodes or strings (text).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v; else e.setAttribute(k, v);
    }
    for (const c of children) {
      if (c === undefined || c === null) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  function fillTable(id, rows, emptyText, cols) {
    const body = $(id).tBodies[0];
    body.replaceChildren(...(rows.length ? rows : [el("tr", { class: "empty" }, el("td", { colspan: cols }, emptyText))]));
  }

  function ago(t) {
    if (!t) return "";
    const s = Math.round((Date.now() - Date.parse(t)) / 1000);
    return s < 0 ? "in " + dur(-s) : dur(s) + " ago";
  }

  function dur(s) {
    s = Math.max(0, Math.round(s));
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60), r = s % 60;
    if (d) return d + "d " + h + "h";
    if (h) return h + "h " + m + "m";
    if (m) return m + "m " + r + "s";
    return r + "s";
  }

  function clock(t) {
    if (!t) return "";
    const d = new Date(t);
    return d.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  async function get(path) {
    const r = await fetch(api(path), { cache: "no-store", credentials: "same-origin" });
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }

  function connected(ok, why) {
    const c = $("conn");
    c.className = "conn " + (ok ? "ok" : "bad");
    c.textContent = ok ? "live" : "box unreachable: " + why;
    if (ok) $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  }

  // --- status ----------------------------------------------------------

  function renderStatus(s) {
    $("site").textContent = s.site || "";
    $("version").textContent = s.version || "?";
    $("uptime").textContent = dur(s.uptime_s || 0);
    $("config-version").textContent = s.config_version;
    // A source naming a file is shown by its base name: the page is narrow.
    const src = (s.config_source || "").replace(/^file:.*\//, "file ");
    $("config-source").textContent = src ? "(" + src + ")" : "";
    document.title = (s.mode || "?").toUpperCase() + " · " + (s.site || "Outpost") + " · Outpost status";

    const card = $("mode-card");
    card.className = "card mode " + (s.mode || "unknown");
    $("mode").textContent = s.mode || "?";
    const detail = [];
    if (s.mode_reason) detail.push(s.mode_reason);
    if (s.mode_cause && s.mode_cause !== s.mode_reason) detail.push("cause: " + s.mode_cause);
    if (s.mode_since) detail.push("since " + clock(s.mode_since) + " (" + ago(s.mode_since) + ")");
    if (s.hold_until) detail.push("failback " + ago(s.hold_until) + " if HQ stays healthy");
    $("mode-detail").textContent = detail.join(" · ");
    const drain = $("drain");
    drain.hidden = !s.draining;
    if (s.draining) drain.textContent = "DRAINING: new calls are refused until " + clock(s.drain_until) + "; calls in progress finish";

    const ts = (s.mode_transitions || []).slice().reverse();
    const tl = $("timeline");
    tl.replaceChildren(...(ts.length ? ts.map((t) => el("li", { class: "to-" + t.to },
      el("div", null, el("b", null, (t.from ? t.from + " → " : "") + t.to), " — ", t.reason || "", t.detail ? ": " + t.detail : ""),
      el("div", { class: "when" }, clock(t.at) + " (" + ago(t.at) + ")"))) : [el("li", { class: "empty" }, "no transitions yet")]));

    const hq = s.hq || [];
    $("hq-count").textContent = hq.length ? hq.filter((h) => h.up).length + "/" + hq.length + " up" : "";
    fillTable("hq", hq.map((h) => el("tr", null,
      el("td", { class: "mono" }, h.target),
      el("td", { class: h.up ? "up" : "down" }, h.up ? "up" : (h.blocked_until ? "blocked" : "down")),
      el("td", null, h.last_rtt_ms ? h.last_rtt_ms.toFixed(1) + " ms" : "–"),
      el("td", { class: "wide" }, h.consecutive_ok + "/" + h.consecutive_fail),
      el("td", { class: "wide" }, ago(h.last_change)),
      el("td", null, h.reason || ""))), "no HQ configured (standalone)", 6);
    const up = $("upstream");
    const states = Object.entries(s.upstream || {});
    up.hidden = states.length === 0;
    up.textContent = "upstream registrations at HQ: " + states.map(([k, v]) => v + " " + k).join(", ");
  }

  // --- registrations -----------------------------------------------------

  let regs = [];

  function renderRegistrations() {
    $("reg-count").textContent = regs.length;
    const q = $("reg-filter").value.trim().toLowerCase();
    const shown = regs.filter((r) => !q || [r.aor, r.source, r.user_agent, r.contact].some((v) => (v || "").toLowerCase().includes(q)));
    fillTable("registrations", shown.map((r) => el("tr", null,
      el("td", { class: "mono" }, r.aor),
      el("td", { class: "mono" }, r.source),
      el("td", null, r.user_agent || "–"),
      el("td", { class: "wide mono" }, r.contact),
      el("td", null, dur(r.expires_in_s)))), q ? "no registration matches" : "no registrations", 5);
  }

  // --- do not disturb and forwarding ---------------------------------------

  function renderServices(us) {
    $("svc-count").textContent = us.length;
    fillTable("services", us.map((u) => el("tr", null,
      el("td", { class: "mono" }, u.extension),
      el("td", { class: u.dnd ? "down" : "" }, u.dnd ? "on" : "–"),
      el("td", { class: "mono" }, u.forward_always || "–"),
      el("td", { class: "mono" }, u.forward_busy || "–"),
      el("td", { class: "mono" }, u.forward_no_answer ? u.forward_no_answer + (u.no_answer_s ? " after " + u.no_answer_s + " s" : "") : "–"),
      el("td", { class: "wide" }, (u.from_phone || []).join(", ") || "–"))), "no user has DND or a forward", 6);
  }

  // --- calls ---------------------------------------------------------------

  function leg(m) {
    if (!m) return "–";
    return el("span", { class: "leg" }, m.packets + " pkts · " + m.lost + " lost · " + m.jitter_ms.toFixed(1) + " ms jitter");
  }

  function renderCalls(calls) {
    $("call-count").textContent = calls.length;
    fillTable("calls", calls.map((c) => el("tr", null,
      el("td", { class: "mono" }, c.from),
      el("td", { class: "mono" }, c.to + (c.target && c.target !== c.to ? " → " + c.target : "")),
      el("td", null, c.route),
      el("td", null, c.state),
      el("td", null, dur((Date.now() - Date.parse(c.answered || c.started)) / 1000)),
      el("td", null, leg(c.media && c.media[0])),
      el("td", null, leg(c.media && c.media[1])))), "no calls", 7);
  }

  // --- interfaces ------------------------------------------------------------

  function renderInterfaces(ifs) {
    fillTable("links", (ifs.links || []).map((l) => el("tr", null,
      el("td", { class: "mono" }, l.name + (l.vlan_id ? " (VLAN " + l.vlan_id + ")" : "")),
      el("td", { class: l.up && l.carrier ? "up" : "down" }, l.up ? (l.carrier ? "up" : "no carrier") : "down"),
      el("td", { class: "mono" }, (l.addrs || []).join(" ")),
      el("td", { class: "wide" }, l.kind),
      el("td", null, (l.roles || []).join(", ")))), "no interfaces", 5);
    fillTable("msr", (ifs.msr || []).map((u) => el("tr", null,
      el("td", { class: "mono" }, u.interface),
      el("td", { class: "mono" }, u.addr),
      el("td", { class: "mono" }, u.server),
      el("td", { class: u.registered ? "up" : "down" }, u.registered ? "yes" : "no"),
      el("td", { class: "wide" }, u.last_error || (u.last_code ? String(u.last_code) : "")))), "MSR registration is off", 5);
    const cc = ifs.control_channel, note = $("control");
    note.hidden = !cc;
    if (cc) note.textContent = "control channel " + (cc.listen || "not listening") + (cc.error ? " (" + cc.error + ")" : "") +
      ": " + (cc.peers || []).length + " connected, " + cc.accepted + " accepted, " + cc.refused + " refused, " + cc.dropped + " dropped";
  }

  // --- CDRs --------------------------------------------------------------------

  let cdrs = [];      // newest last, at most CDR_KEEP
  let cdrSince = null; // the newest start seen; the next poll asks from there

  function renderCDRs() {
    fillTable("cdr", cdrs.slice().reverse().map((c) => el("tr", null,
      el("td", null, clock(c.started)),
      el("td", { class: "mono" }, c.caller),
      el("td", { class: "mono" }, c.dialled),
      el("td", null, c.route),
      el("td", { class: "wide" }, c.mode),
      el("td", { class: c.code >= 200 && c.code < 300 ? "up" : "" }, c.code + " " + (c.disposition || "")),
      el("td", null, c.duration_s ? dur(c.duration_s) : "–"))), "no calls recorded today", 7);
  }

  async function pollCDRs() {
    const since = cdrSince || new Date(Date.now() - 86400e3).toISOString();
    const recs = await get("cdr?since=" + encodeURIComponent(since));
    const seen = new Set(cdrs.map((c) => c.id));
    for (const c of recs) if (!seen.has(c.id)) cdrs.push(c);
    cdrs.sort((a, b) => Date.parse(a.started) - Date.parse(b.started) || a.id - b.id);
    cdrs = cdrs.slice(-CDR_KEEP);
    if (cdrs.length) cdrSince = cdrs[cdrs.length - 1].started;
    renderCDRs();
  }

  // --- polling ---------------------------------------------------------------------

  async function fast() {
    try {
      const [s, r, c] = await Promise.all([get("status"), get("registrations"), get("calls")]);
      renderStatus(s);
      regs = r || [];
      renderRegistrations();
      renderCalls(c || []);
      connected(true);
    } catch (e) {
      connected(false, e.message);
    }
    setTimeout(fast, FAST_MS);
  }

  async function slow() {
    try {
      renderInterfaces(await get("interfaces"));
      renderServices(await get("services") || []);
      await pollCDRs();
    } catch (e) {
      connected(false, e.message);
    }
    setTimeout(slow, SLOW_MS);
  }

  $("reg-filter").addEventListener("input", renderRegistrations);
  fast();
  slow();
})();
