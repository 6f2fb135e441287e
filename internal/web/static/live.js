// kici web UI: the live parts only. Every page works without this file;
// it refreshes lists, follows a run's event stream and tails a running
// step's log. Text from logs is inserted with textContent, never as
// markup; refreshed page fragments come from the server's templates,
// which escape every value.
(function () {
  "use strict";
  var body = document.body;
  var mode = body.getAttribute("data-live");
  var url = body.getAttribute("data-live-url");

  // A #L42 link to a line on another page of a paged log: open that page.
  var log = document.getElementById("log");
  if (log && /^#L\d+$/.test(location.hash) && !document.getElementById(location.hash.slice(1))) {
    var q = new URLSearchParams(location.search);
    q.set("line", location.hash.slice(2));
    q.delete("from");
    location.replace(location.pathname + "?" + q.toString());
    return;
  }

  // refreshMain swaps <main> for the same page rendered again by the
  // server (the X-Kici-Fragment header asks for the main block only).
  var refreshing = false;
  function refreshMain() {
    if (refreshing) { return; }
    refreshing = true;
    fetch(location.href, { headers: { "X-Kici-Fragment": "main" }, credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok || r.redirected) { throw new Error("refresh " + r.status); }
        return r.text();
      })
      .then(function (html) {
        var main = document.getElementById("main");
        var active = document.activeElement;
        if (active && main.contains(active) && active.tagName !== "BODY") { return; } // do not disturb typing
        // Tables scrolled sideways (phone width) keep their position.
        var boxes = main.querySelectorAll(".scroll"), lefts = [];
        for (var i = 0; i < boxes.length; i++) { lefts.push(boxes[i].scrollLeft); }
        main.innerHTML = html;
        boxes = main.querySelectorAll(".scroll");
        for (var k = 0; k < boxes.length && k < lefts.length; k++) { boxes[k].scrollLeft = lefts[k]; }
      })
      .catch(function () {})
      .then(function () { refreshing = false; });
  }

  // Running steps and jobs show how long they have been running: the
  // server renders the time when the page was made and data-since the
  // start (RFC 3339); this counts on every second (also in refreshed
  // fragments, found again on each tick).
  function fmtElapsed(sec) {
    var p2 = function (n) { return (n < 10 ? "0" : "") + n; };
    if (sec < 60) { return sec + "s"; }
    if (sec < 3600) { return Math.floor(sec / 60) + "m " + p2(sec % 60) + "s"; }
    return Math.floor(sec / 3600) + "h " + p2(Math.floor(sec / 60) % 60) + "m";
  }
  setInterval(function () {
    var els = document.querySelectorAll(".elapsed[data-since]");
    for (var i = 0; i < els.length; i++) {
      var t = Date.parse(els[i].getAttribute("data-since"));
      if (!isNaN(t)) { els[i].textContent = fmtElapsed(Math.max(0, Math.floor((Date.now() - t) / 1000))); }
    }
  }, 1000);

  // A running job between two steps: look again shortly for the next.
  if (mode === "await-step") {
    setTimeout(function () { location.reload(); }, 1500);
  }

  if (mode === "refresh") {
    setInterval(refreshMain, 3000);
  }

  // A run page follows the run's event stream and re-renders when a run
  // or job status differs from what the page shows.
  if (mode === "run" && url && window.EventSource) {
    var es = new EventSource(url);
    var timer = null;
    var changed = function () {
      if (timer) { return; }
      timer = setTimeout(function () { timer = null; refreshMain(); }, 250);
    };
    var shown = function (el, status) { return el && el.textContent.trim() === status; };
    es.addEventListener("run", function (ev) {
      if (!shown(document.getElementById("run-status"), JSON.parse(ev.data).status)) { changed(); }
    });
    es.addEventListener("job", function (ev) {
      var j = JSON.parse(ev.data);
      var row = document.querySelector('#jobs tr[data-job-id="' + CSS.escape(j.jobId) + '"] .badge');
      if (!shown(row, j.status)) { changed(); }
    });
    es.addEventListener("end", function () { es.close(); changed(); });
  }

  if (mode === "tail" && url && window.EventSource && log) {
    var tbody = log.tBodies[0];
    var stamps = log.getAttribute("data-ts") === "1";
    var state = document.getElementById("tail-state");
    var tail = new EventSource(url);
    tail.addEventListener("line", function (ev) {
      var l = JSON.parse(ev.data);
      var n = l.n + 1;
      if (document.getElementById("L" + n)) { return; }
      var empty = document.getElementById("log-empty");
      if (empty) { empty.parentNode.removeChild(empty); }
      var tr = document.createElement("tr");
      tr.id = "L" + n;
      tr.className = l.stream === "stderr" ? "stderr" : "stdout";
      var ln = document.createElement("td");
      ln.className = "ln";
      var a = document.createElement("a");
      a.href = "#L" + n;
      a.textContent = String(n);
      ln.appendChild(a);
      tr.appendChild(ln);
      if (stamps) {
        var ts = document.createElement("td");
        ts.className = "ts";
        var at = new Date(l.ts);
        if (l.ts > 0 && !isNaN(at.getTime())) {
          ts.title = at.toISOString();
          ts.textContent = at.toISOString().slice(11, 23);
        }
        tr.appendChild(ts);
      }
      var msg = document.createElement("td");
      msg.className = "msg";
      renderANSI(msg, l.msg);
      tr.appendChild(msg);
      var atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
      tbody.appendChild(tr);
      if (atBottom) { window.scrollTo(0, document.body.scrollHeight); }
    });
    tail.addEventListener("end", function () {
      tail.close();
      if (state) { state.textContent = "finished"; }
      // A page opened without ?step follows the job: it opens again on
      // the step that runs next (or the failing one, or the last).
      if (!new URLSearchParams(location.search).has("step")) {
        setTimeout(function () { location.reload(); }, 300);
        return;
      }
      // The step list and statuses are redrawn in place; the lines already
      // shown stay (the server renders the same page of the log).
      setTimeout(refreshMain, 300);
    });
  }

  // renderANSI appends text with SGR colours as class names, mirroring the
  // server's renderer: only text nodes and <span class="a-…"> are created.
  // What it drops follows internal/termtext (CSI, OSC, other escapes with
  // their intermediates, control characters), so it never shows text the
  // step-log masker treated as hidden; its OSC bound (1300 UTF-16 units)
  // stays under termtext's 4096 bytes.
  function renderANSI(el, s) {
    var st = { fg: -1, bg: -1, b: false, d: false, i: false, u: false };
    var re = /\x1b\[([0-?]*[ -\/]*)m|\x1b\[[0-?]*[ -\/]*[\s\S]?|\x1b\](?:[^\x07\x1b]|\x1b(?!\\)){0,1300}(?:\x07|\x1b\\|$)|\x1b[ -\/]*[\s\S]?|[\x00-\x08\x0a-\x1f\x7f]/g;
    var last = 0, m;
    function emit(text) {
      if (!text) { return; }
      var c = [];
      if (st.fg >= 0) { c.push("a-f" + st.fg); }
      if (st.bg >= 0) { c.push("a-b" + st.bg); }
      if (st.b) { c.push("a-bold"); } if (st.d) { c.push("a-dim"); }
      if (st.i) { c.push("a-ital"); } if (st.u) { c.push("a-ul"); }
      if (c.length === 0) { el.appendChild(document.createTextNode(text)); return; }
      var sp = document.createElement("span");
      sp.className = c.join(" ");
      sp.textContent = text;
      el.appendChild(sp);
    }
    while ((m = re.exec(s)) !== null) {
      emit(s.slice(last, m.index));
      last = re.lastIndex;
      if (m[1] === undefined) { continue; }
      var ps = m[1] === "" ? ["0"] : m[1].split(";");
      for (var k = 0; k < ps.length; k++) {
        var n = parseInt(ps[k], 10);
        if (isNaN(n)) { continue; }
        if (n === 0) { st = { fg: -1, bg: -1, b: false, d: false, i: false, u: false }; }
        else if (n === 1) { st.b = true; } else if (n === 2) { st.d = true; }
        else if (n === 3) { st.i = true; } else if (n === 4) { st.u = true; }
        else if (n === 22) { st.b = false; st.d = false; } else if (n === 23) { st.i = false; } else if (n === 24) { st.u = false; }
        else if (n >= 30 && n <= 37) { st.fg = n - 30; } else if (n >= 90 && n <= 97) { st.fg = n - 82; } else if (n === 39) { st.fg = -1; }
        else if (n >= 40 && n <= 47) { st.bg = n - 40; } else if (n >= 100 && n <= 107) { st.bg = n - 92; } else if (n === 49) { st.bg = -1; }
        else if (n === 38 || n === 48) {
          var col = -1;
          if (ps[k + 1] === "5") { var v = parseInt(ps[k + 2], 10); if (v >= 0 && v < 16) { col = v; } k += 2; }
          else if (ps[k + 1] === "2") { k += 4; }
          if (n === 38) { st.fg = col; } else { st.bg = col; }
        }
      }
    }
    emit(s.slice(last));
  }
})();
