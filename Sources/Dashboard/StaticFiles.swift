/// The dashboard's style sheet and script, built into the binary: no CDN, no files to ship.
enum StaticFiles {
    static func file(_ path: String) -> (type: String, body: String)? {
        switch path {
        case "/static/app.css": return ("text/css; charset=utf-8", css)
        case "/static/app.js": return ("text/javascript; charset=utf-8", js)
        default: return nil
        }
    }

    static let css = """
        :root { --ink:#1d2430; --muted:#6b7280; --line:#e3e6ea; --bg:#f6f7f9; --card:#fff; --ok:#16794c; --okbg:#e3f5ec;
          --warn:#9a5b00; --warnbg:#fff1d6; --bad:#b42318; --badbg:#fde7e4; --accent:#2457c5; }
        * { box-sizing: border-box; }
        body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--ink); background:var(--bg); }
        header { display:flex; flex-wrap:wrap; align-items:center; gap:16px; padding:10px 20px; background:#1d2430; color:#fff; }
        header .brand { font-weight:700; letter-spacing:.02em; }
        header .queue { color:#aab3c0; font-size:13px; }
        header nav { display:flex; flex-wrap:wrap; gap:4px; flex:1; }
        header nav a { color:#d6dbe3; text-decoration:none; padding:5px 10px; border-radius:6px; }
        header nav a:hover { background:#2c3544; }
        header nav a.current { background:#3b4658; color:#fff; }
        header .who, header .who a, header .who button { color:#d6dbe3; }
        main { max-width:1280px; margin:0 auto; padding:16px 20px 40px; }
        h1 { font-size:20px; margin:6px 0 14px; }
        h2 { font-size:15px; margin:22px 0 8px; }
        footer { color:var(--muted); font-size:12px; text-align:center; padding:10px; }
        .cards { display:grid; grid-template-columns:repeat(auto-fill, minmax(150px, 1fr)); gap:10px; }
        .card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 12px; }
        .card .label { color:var(--muted); font-size:12px; }
        .card .value { font-size:22px; font-weight:600; font-variant-numeric:tabular-nums; }
        .scroll { overflow-x:auto; background:var(--card); border:1px solid var(--line); border-radius:8px; }
        table { border-collapse:collapse; width:100%; }
        th, td { padding:6px 10px; border-bottom:1px solid var(--line); text-align:left; vertical-align:top; }
        th { font-size:12px; color:var(--muted); font-weight:600; background:#fafbfc; white-space:nowrap; }
        tr:last-child td { border-bottom:none; }
        td .num, .num { font-variant-numeric:tabular-nums; }
        td:has(> .num) { text-align:right; }
        code, .mono, pre, textarea { font-family:ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size:12.5px; }
        td code { word-break:break-all; }
        pre { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px; overflow-x:auto; white-space:pre-wrap; word-break:break-all; }
        .badge { display:inline-block; padding:1px 8px; border-radius:999px; font-size:12px; font-weight:600; }
        .ok { color:var(--ok); } .badge.ok { background:var(--okbg); }
        .warn { color:var(--warn); } .badge.warn { background:var(--warnbg); }
        .bad { color:var(--bad); } .badge.bad { background:var(--badbg); }
        .muted, .hint { color:var(--muted); } .badge.muted { background:#eceef1; } .hint { font-size:12px; }
        nav.pager { display:flex; gap:14px; margin:10px 0; }
        .empty { color:var(--muted); background:var(--card); border:1px dashed var(--line); border-radius:8px; padding:14px; }
        .notice { padding:10px 12px; border-radius:8px; margin:10px 0; border:1px solid var(--line); background:var(--card); }
        .notice.bad { background:var(--badbg); border-color:#f5c2bc; } .notice.ok { background:var(--okbg); border-color:#b9e3cc; }
        .notice.warn { background:var(--warnbg); border-color:#f3d9a4; }
        form.filters { display:flex; flex-wrap:wrap; gap:8px; align-items:end; margin-bottom:12px; }
        form.filters label { display:flex; flex-direction:column; font-size:12px; color:var(--muted); gap:2px; }
        input, select, button, textarea { font:inherit; }
        input, select { padding:5px 8px; border:1px solid #cfd4da; border-radius:6px; background:#fff; }
        textarea { width:100%; min-height:180px; padding:8px; border:1px solid #cfd4da; border-radius:6px; }
        button { padding:6px 12px; border-radius:6px; border:1px solid #cfd4da; background:#fff; cursor:pointer; }
        button.primary { background:var(--accent); border-color:var(--accent); color:#fff; }
        button.danger { background:var(--bad); border-color:var(--bad); color:#fff; }
        button.link { border:none; background:none; padding:0; text-decoration:underline; }
        form.inline { display:inline; }
        .actions { display:flex; flex-wrap:wrap; gap:8px; margin:10px 0; }
        a { color:var(--accent); }
        .charts { display:grid; grid-template-columns:repeat(auto-fit, minmax(min(420px, 100%), 1fr)); gap:12px; }
        .skip { position:absolute; left:-9999px; top:0; background:#fff; color:var(--accent); padding:8px 12px; z-index:10; }
        .skip:focus { left:8px; }
        .chart-box { margin:0; background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px; }
        .chart-box figcaption { font-weight:600; margin-bottom:4px; }
        svg.chart { width:100%; height:auto; display:block; }
        svg .grid { stroke:#eceef1; stroke-width:1; }
        svg .axis { fill:#6b7280; font-size:10px; }
        svg .bar.delivered { fill:#2e9b6a; } svg .bar.failed { fill:#d99a1e; } svg .bar.dead { fill:#cf3b2c; }
        svg .line { fill:none; stroke-width:1.5; }
        svg .line.delivered { stroke:#2e9b6a; } svg .line.failed { stroke:#d99a1e; } svg .line.dead { stroke:#cf3b2c; }
        .legend { display:flex; flex-wrap:wrap; gap:14px; font-size:12px; color:var(--muted); margin-top:4px; }
        .legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; vertical-align:-1px; }
        .key.delivered i { background:#2e9b6a; } .key.failed i { background:#d99a1e; } .key.dead i { background:#cf3b2c; }
        dl.facts { display:grid; grid-template-columns:max-content 1fr; gap:4px 14px; background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 12px; }
        dl.facts dt { color:var(--muted); } dl.facts dd { margin:0; word-break:break-all; }
        .login { max-width:380px; background:var(--card); border:1px solid var(--line); border-radius:8px; padding:16px; }
        .login input { width:100%; margin:6px 0 12px; }
        @media (max-width: 700px) { header nav { order:3; width:100%; } main { padding:12px; } }
        """

    /// Refreshes a page that asks for it (body[data-refresh]) by fetching it again and swapping
    /// <main>, unless the reader is typing, has selected text, or paused it (the footer's
    /// button, kept for the tab); keyboard focus stays on the same link or button.
    static let js = """
        (function () {
          var body = document.body;
          var seconds = body && Number(body.getAttribute('data-refresh'));
          if (!seconds) return;
          var toggle = document.getElementById('refresh-toggle');
          function paused() { return sessionStorage.getItem('apnsw-paused') === '1'; }
          function label() { if (toggle) toggle.textContent = paused() ? 'Resume' : 'Pause'; }
          if (toggle) toggle.addEventListener('click', function () {
            sessionStorage.setItem('apnsw-paused', paused() ? '0' : '1');
            label();
          });
          label();
          function focusables(root) { return Array.prototype.slice.call(root.querySelectorAll('a, button, input, select, textarea')); }
          function busy() {
            var a = document.activeElement;
            if (a && (a.tagName === 'INPUT' || a.tagName === 'TEXTAREA' || a.tagName === 'SELECT')) return true;
            var s = window.getSelection && window.getSelection();
            return s && String(s).length > 0;
          }
          function refresh() {
            if (busy() || document.hidden || paused()) return;
            fetch(window.location.href, { credentials: 'same-origin', headers: { 'X-Refresh': '1' } })
              .then(function (r) { return r.ok ? r.text() : null; })
              .then(function (text) {
                if (!text || busy()) return;
                var next = new DOMParser().parseFromString(text, 'text/html');
                var main = next.getElementById('main'), now = next.getElementById('updated');
                var old = document.getElementById('main'), focused = document.activeElement;
                var at = old && old.contains(focused) ? focusables(old).indexOf(focused) : -1;
                if (main) old.replaceWith(main);
                if (main && at >= 0) {
                  var same = focusables(main)[at];
                  if (same) same.focus();
                }
                if (now) document.getElementById('updated').replaceWith(now);
                body.setAttribute('data-refreshed', String(Date.now()));
              })
              .catch(function () {});
          }
          setInterval(refresh, seconds * 1000);
        })();
        """
}
