// Paddock's console: the tree, sessions, watches and the ensemble, read
// and changed through /console/api as the signed-in person.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { path: "/", node: null, liveTimer: null, samples: [], lastLive: null };

function say(text, error = false) {
  const status = $("status");
  status.textContent = text;
  status.className = error ? "error" : "";
}

async function api(name, params = {}, body = null) {
  const url = "/console/api/" + name + "?" + new URLSearchParams(params);
  const options = body === null ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const reply = await fetch(url, options);
  const answer = await reply.json().catch(() => ({ error: reply.statusText }));
  if (!reply.ok) throw new Error(answer.error || reply.statusText);
  return answer;
}

function childPath(parent, name) {
  return parent === "/" ? "/" + name : parent + "/" + name;
}

function element(tag, attributes = {}, text = "") {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
}

// ---------------------------------------------------------------- tree

function treeRow(path, name, children) {
  const item = element("li", { role: "treeitem", "data-path": path, "aria-expanded": "false" });
  const row = element("div", { class: "row" });
  // null: the person may not know how many children it has.
  const openable = children === null || children > 0;
  const toggle = element("button", { class: "toggle", tabindex: "-1", "aria-label": "open " + path },
    openable ? "▸" : " ");
  const label = element("button", { class: "name", "data-path": path }, name);
  toggle.addEventListener("click", () => toggleOpen(item));
  label.addEventListener("click", () => select(path, item));
  label.addEventListener("keydown", (event) => keyInTree(event, item));
  row.append(toggle, label);
  item.append(row);
  if (openable) item.dataset.children = children ?? "?";
  return item;
}

async function loadChildren(item, after = "") {
  const path = item.dataset.path;
  let group = item.querySelector(":scope > ul");
  if (!group) {
    group = element("ul", { role: "group" });
    item.append(group);
  }
  const prefix = path === state.path ? $("filter").value : "";
  const page = await api("children", { path, after, prefix });
  group.querySelector(":scope > .more")?.remove();
  for (const child of page.children) {
    group.append(treeRow(childPath(path, child.name), child.name, child.children));
  }
  if (page.more) {
    const last = page.children[page.children.length - 1].name;
    const more = element("li", { class: "more" });
    const button = element("button", {}, "more children…");
    button.addEventListener("click", () => loadChildren(item, last));
    more.append(button);
    group.append(more);
  }
}

async function toggleOpen(item) {
  if (!item.dataset.children) return;
  const open = item.getAttribute("aria-expanded") === "true";
  item.setAttribute("aria-expanded", String(!open));
  item.querySelector(":scope > .row .toggle").textContent = open ? "▸" : "▾";
  if (open) {
    item.querySelector(":scope > ul")?.remove();
  } else {
    await loadChildren(item).catch((e) => say(e.message, true));
  }
}

function keyInTree(event, item) {
  const rows = [...document.querySelectorAll("#tree .name")].filter((b) => b.offsetParent !== null);
  const at = rows.indexOf(event.target);
  const moves = {
    ArrowDown: () => rows[at + 1]?.focus(),
    ArrowUp: () => rows[at - 1]?.focus(),
    ArrowRight: () => item.getAttribute("aria-expanded") === "false" && toggleOpen(item),
    ArrowLeft: () => item.getAttribute("aria-expanded") === "true" && toggleOpen(item),
  };
  if (moves[event.key]) {
    event.preventDefault();
    moves[event.key]();
  }
}

async function select(path, item) {
  document.querySelectorAll("#tree .name.selected").forEach((b) => b.classList.remove("selected"));
  item?.querySelector(":scope > .row .name")?.classList.add("selected");
  state.path = path;
  try {
    showNode(await api("node", { path }));
    say("");
  } catch (e) {
    say(e.message, true);
  }
}

function showNode(node) {
  state.node = node;
  $("node-path").textContent = node.path;
  const data = node.data;
  const shown = { null: "(null)", text: data.text, json: data.pretty, binary: data.hex }[data.kind];
  $("node-data").textContent = shown + (data.cut ? "\n… (" + data.bytes + " bytes in all)" : "");
  $("node-data-kind").textContent = "(" + data.kind + ", " + data.bytes + " bytes)";
  $("edit-data").value = data.kind === "text" || data.kind === "json" ? data.text : "";
  $("edit-version").textContent = node.stat.version;
  const stat = $("node-stat");
  stat.replaceChildren();
  for (const [key, value] of Object.entries(node.stat)) {
    const shownValue = key.endsWith("time") ? new Date(value).toISOString() + " (" + value + ")" : value;
    const row = element("tr");
    row.append(element("th", {}, key), element("td", {}, String(shownValue)));
    stat.append(row);
  }
  const acl = $("node-acl").tBodies[0];
  acl.replaceChildren();
  for (const entry of node.acl) {
    const row = element("tr");
    row.append(element("td", {}, entry.scheme), element("td", {}, entry.id), element("td", {}, entry.perms));
    acl.append(row);
  }
  $("recipe-queue").replaceChildren();
}

async function refreshTree() {
  const root = $("tree");
  root.replaceChildren();
  const item = treeRow("/", "/", 1);
  root.append(item);
  await toggleOpen(item).catch((e) => say(e.message, true));
}

// Marks the page busy (aria-busy) from the moment an action is asked for
// until its outcome shows, for people and tests alike; a failure is said.
async function busyWhile(work) {
  document.body.setAttribute("aria-busy", "true");
  try {
    await work();
  } catch (e) {
    say(e.message, true);
  } finally {
    document.body.removeAttribute("aria-busy");
  }
}

// Makes a change, then shows the tree and the znode as they now are.
async function act(what, done) {
  const answer = await what();
  await refreshTree();
  await select(state.path, null);
  say(done(answer));
}

function confirmDialog(text) {
  return new Promise((resolve) => {
    const dialog = $("confirm");
    $("confirm-text").textContent = text;
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
  });
}

$("edit-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const body = { path: state.path, data: $("edit-data").value, version: state.node.stat.version };
  busyWhile(() => act(() => api("set", {}, body),
    (a) => "saved " + body.path + " (version " + a.stat.version + ")"));
});

$("create-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const body = {
    path: childPath(state.path, $("create-name").value),
    data: $("create-data").value,
    mode: $("create-mode").value,
  };
  busyWhile(() => act(() => api("create", {}, body), (a) => "created " + a.path));
});

function parentOf(path) {
  return path.substring(0, path.lastIndexOf("/")) || "/";
}

$("delete-one").addEventListener("click", () => busyWhile(async () => {
  const path = state.path;
  const version = state.node.stat.version;
  if (!(await confirmDialog("Delete " + path + " (version " + version + ")?"))) return;
  state.path = parentOf(path);
  await act(() => api("delete", {}, { path, version }), () => "deleted " + path);
}));

$("delete-all").addEventListener("click", () => busyWhile(async () => {
  const path = state.path;
  const { count } = await api("subtree-size", { path });
  if (!(await confirmDialog("Delete " + path + " and everything below it: " + count + " znodes?"))) return;
  state.path = parentOf(path);
  await act(() => api("delete", {}, { path, recursive: true, count }),
    (a) => "deleted " + a.deleted + " znodes");
}));

$("recipe-show").addEventListener("click", async () => {
  try {
    const { queue } = await api("recipe", { path: state.path });
    const list = $("recipe-queue");
    list.replaceChildren();
    queue.forEach((entry, i) => {
      const role = i === 0 ? "holds" : "waits";
      list.append(element("li", {}, entry.name + " — session " + entry.session + " " + role));
    });
    if (!queue.length) say("no sequential znodes under " + state.path);
  } catch (e) {
    say(e.message, true);
  }
});

$("filter").addEventListener("input", () => {
  const item = document.querySelector('#tree li[data-path="' + CSS.escape(state.path) + '"]');
  if (!item || !item.dataset.children) return;
  item.querySelector(":scope > ul")?.remove();
  item.setAttribute("aria-expanded", "true");
  loadChildren(item).catch((e) => say(e.message, true));
});

// ---------------------------------------------------------------- sessions, watches

async function showSessions() {
  const body = $("sessions").tBodies[0];
  const { sessions } = await api("sessions");
  body.replaceChildren();
  for (const s of sessions) {
    const row = element("tr", { "data-session": s.id });
    const seen = s.last_seen_ms ? new Date(s.last_seen_ms).toISOString() : "elsewhere";
    const close = element("button", {}, "Close");
    close.addEventListener("click", () => busyWhile(async () => {
      if (!(await confirmDialog("Close session " + s.id + "? Its ephemerals go with it."))) return;
      await api("close-session", {}, { id: s.id });
      say("closed " + s.id);
      await showSessions();
    }));
    const cells = [s.id, s.client || "not connected here", s.timeout_ms + " ms", seen,
      s.ephemerals.join(", "), s.watches.join(", ")];
    cells.forEach((c) => row.append(element("td", {}, c)));
    const last = element("td");
    last.append(close);
    row.append(last);
    body.append(row);
  }
}

async function showWatches() {
  const body = $("watches").tBodies[0];
  const { watches } = await api("watches");
  body.replaceChildren();
  for (const w of watches) {
    const row = element("tr");
    row.append(element("td", {}, w.path), element("td", {}, w.sessions.join(", ")));
    body.append(row);
  }
}

// ---------------------------------------------------------------- ensemble

async function showEnsemble() {
  const ensemble = await api("ensemble");
  $("leader-changes").textContent = ensemble.leader_changes;
  const body = $("servers").tBodies[0];
  body.replaceChildren();
  for (const s of ensemble.servers) {
    const row = element("tr", { "data-server": s.id });
    const me = s.id === ensemble.me ? " (this one)" : "";
    [s.id + me, s.address, s.mode, s.zxid ?? "", s.lag ?? "", s.connections ?? "", s.latency ?? ""]
      .forEach((c) => row.append(element("td", {}, String(c))));
    body.append(row);
  }
  const leaders = $("leaders").tBodies[0];
  leaders.replaceChildren();
  for (const l of ensemble.leaders.slice().reverse()) {
    const row = element("tr");
    [new Date(l.at_ms).toLocaleString(), "server " + l.id, String(l.term)]
      .forEach((c) => row.append(element("td", {}, c)));
    leaders.append(row);
  }
}

function drawChart(canvas, series) {
  const g = canvas.getContext("2d");
  const { width, height } = canvas;
  g.clearRect(0, 0, width, height);
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  g.fillStyle = "#5a6b82";
  g.fillText(max.toFixed(1), 2, 10);
  const colours = ["#2f6fd6", "#d66a2f"];
  series.forEach((s, n) => {
    g.strokeStyle = colours[n % colours.length];
    g.beginPath();
    s.values.forEach((v, i) => {
      const x = (i / 59) * width;
      const y = height - (v / max) * (height - 12);
      i === 0 ? g.moveTo(x, y) : g.lineTo(x, y);
    });
    g.stroke();
  });
}

async function sampleLive() {
  const live = await api("live");
  const now = performance.now();
  const previous = state.lastLive;
  state.lastLive = { at: now, live };
  if (!previous) return;
  const seconds = (now - previous.at) / 1000;
  state.samples.push({
    requests: (live.packets_received - previous.live.packets_received) / seconds,
    read: live.read_latency.p99_ms,
    write: live.update_latency.p99_ms,
    fsync: live.fsync.p99_ms,
    memory: (live.resident_bytes || 0) / 1048576,
  });
  state.samples = state.samples.slice(-60);
  const values = (key) => state.samples.map((s) => s[key]);
  drawChart($("chart-requests"), [{ values: values("requests") }]);
  drawChart($("chart-latency"), [{ values: values("read") }, { values: values("write") }]);
  drawChart($("chart-fsync"), [{ values: values("fsync") }]);
  drawChart($("chart-memory"), [{ values: values("memory") }]);
}

// ---------------------------------------------------------------- views

const views = {
  tree: () => {},
  sessions: showSessions,
  watches: showWatches,
  ensemble: showEnsemble,
};

function show(view) {
  for (const tab of document.querySelectorAll("nav button")) {
    tab.setAttribute("aria-selected", String(tab.dataset.view === view));
  }
  for (const section of document.querySelectorAll(".view")) {
    section.hidden = section.id !== "view-" + view;
  }
  clearInterval(state.liveTimer);
  const refresh = () => views[view]().catch((e) => say(e.message, true));
  refresh();
  if (view === "ensemble") {
    state.liveTimer = setInterval(() => {
      refresh();
      sampleLive().catch((e) => say(e.message, true));
    }, 1000);
  }
}

document.querySelectorAll("nav button").forEach((tab) => {
  tab.addEventListener("click", () => show(tab.dataset.view));
});

api("me").then((me) => { $("signed-in-as").textContent = "signed in as " + me.ids.join(", "); })
  .catch((e) => say(e.message, true));
refreshTree().then(() => select("/", document.querySelector("#tree li")));
