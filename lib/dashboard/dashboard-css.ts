/**
 * The dashboard's stylesheet, served as `<path>/assets/dashboard.css` (the CSP allows styles
 * from the dashboard's own origin only; no inline style anywhere). Readable from 390 px wide up.
 */
export const DASHBOARD_CSS = `
:root{--fg:#1d2330;--muted:#6b7385;--bg:#f5f6f8;--card:#fff;--line:#dfe2e8;--accent:#2f5bd3;--bad:#c0392b;--warn:#b7791f;--ok:#2e7d4f;font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;font-size:14px;color:var(--fg);background:var(--bg)}
*{box-sizing:border-box}
body{margin:0}
a{color:var(--accent);text-decoration:none}
a:hover{text-decoration:underline}
code,pre,.key,.json{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px}
header.top{display:flex;flex-wrap:wrap;align-items:center;gap:6px 18px;padding:10px 20px;background:#1d2330;color:#e8ebf2}
header.top .brand{color:#fff;font-weight:700;font-size:16px}
header.top nav{display:flex;flex-wrap:wrap;gap:4px 4px}
header.top nav a{color:#c9d1e3;padding:4px 9px;border-radius:5px}
header.top nav a.on,header.top nav a:hover{background:#354056;color:#fff;text-decoration:none}
header.top .who{margin-left:auto;color:#9aa4b8;font-size:12.5px}
main{padding:16px 20px 40px;max-width:1400px;margin:0 auto}
h1{font-size:20px;margin:4px 0 12px}
h2{font-size:15px;margin:0 0 10px}
h3{font-size:14px;margin:0 0 8px}
.sub{color:var(--muted);margin:-6px 0 12px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 16px;margin:0 0 14px;min-width:0}
.cols{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:0 14px}
@media (max-width:900px){.cols{grid-template-columns:minmax(0,1fr)}}
.scroll{overflow-x:auto;max-width:100%}
table.grid{border-collapse:collapse;width:100%}
table.grid th,table.grid td{border-bottom:1px solid var(--line);padding:6px 8px;text-align:left;vertical-align:top;white-space:nowrap}
table.grid th{font-weight:600;color:var(--muted);font-size:12.5px}
table.grid td.err{white-space:normal;min-width:200px;max-width:420px;color:var(--bad);overflow-wrap:anywhere}
table.grid td.wrap{white-space:normal;min-width:150px}
table.grid td.key{max-width:260px;overflow:hidden;text-overflow:ellipsis}
.num{text-align:right !important;font-variant-numeric:tabular-nums}
table.kv{border-collapse:collapse;width:100%}
table.kv th{text-align:left;color:var(--muted);font-weight:500;padding:4px 12px 4px 0;white-space:nowrap;vertical-align:top;width:1%}
table.kv td{padding:4px 0;overflow-wrap:anywhere}
pre.json{background:#f1f3f7;border:1px solid var(--line);border-radius:6px;padding:8px 10px;margin:0;max-height:420px;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere}
table.grid td pre.json{max-width:360px;max-height:120px}
.badge{display:inline-block;padding:1px 7px;border-radius:10px;font-size:11.5px;font-weight:600;background:#e7e9ee;color:#3d4455;white-space:nowrap}
.st-runnable{background:#e3ecff;color:#234aa8}
.st-executing{background:#fff1d6;color:#8a5a00}
.st-awaiting_signal,.st-awaiting_children{background:#efe5fb;color:#5d3594}
.st-done{background:#dff3e6;color:#1f6a3f}
.st-failed{background:#fbe1de;color:#9d2a1e}
.st-cancelled{background:#e7e9ee;color:#50586b}
.st-requested{background:#fff1d6;color:#8a5a00}
.badge.paused{background:#fde7c8;color:#8a4b00}
.muted{color:var(--muted)}
.warn{color:var(--warn);font-weight:600}
.error{color:var(--bad);overflow-wrap:anywhere}
.flash{background:#e8f0ff;border:1px solid #bfd0fb;border-radius:6px;padding:8px 12px;margin:0 0 12px}
form.filters .row{display:flex;flex-wrap:wrap;gap:8px 12px;align-items:flex-end;margin-bottom:10px}
form.filters label{display:flex;flex-direction:column;gap:3px;font-size:12px;color:var(--muted);flex:1 1 160px;min-width:140px}
fieldset.statuses{border:0;padding:0;margin:0 0 10px;display:flex;flex-wrap:wrap;gap:6px 14px}
fieldset.statuses legend{font-size:12px;color:var(--muted);padding:0;margin-bottom:4px}
label.check{display:inline-flex;align-items:center;gap:5px;flex:none !important;min-width:0 !important;flex-direction:row !important}
input,select,textarea{font:inherit;padding:5px 7px;border:1px solid #c6cbd6;border-radius:5px;background:#fff;color:var(--fg);max-width:100%}
textarea{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12.5px;width:100%}
button,.button{font:inherit;display:inline-block;padding:5px 12px;border-radius:5px;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer;white-space:nowrap}
.button:hover{text-decoration:none}
button.danger{background:var(--bad);border-color:var(--bad)}
.button.ghost{background:#fff;color:var(--accent)}
.button.small{padding:2px 8px;font-size:12.5px}
form.inline{display:inline-flex;gap:6px;align-items:center;margin:0}
form.inline input{width:120px}
.actions{display:grid;grid-template-columns:repeat(auto-fit,minmax(250px,1fr));gap:12px}
form.action{display:flex;flex-direction:column;gap:8px;border:1px solid var(--line);border-radius:6px;padding:10px 12px;margin:0}
form.action label{display:flex;flex-direction:column;gap:3px;font-size:12px;color:var(--muted)}
form.action button{align-self:flex-start}
.summary{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;margin:0 0 8px}
.summary .bulk{margin-left:auto;color:var(--muted)}
nav.pager{display:flex;gap:16px;justify-content:flex-end;margin-top:10px}
ul.tree{list-style:none;padding-left:16px;margin:4px 0;border-left:1px dashed var(--line)}
ul.tree li{margin:4px 0}
section.card>ul.tree{padding-left:4px;border-left:0}
ol.timeline{list-style:none;padding:0;margin:0}
ol.timeline li{border-left:3px solid var(--line);padding:4px 0 6px 10px;margin:0 0 4px}
ol.timeline .kind{font-weight:600}
ol.timeline .actor{color:var(--ok);font-weight:600}
ul.reasons{margin:0;padding-left:18px}
ul.reasons li{margin:3px 0}
.graph{overflow:auto;max-width:100%}
.graph svg{max-width:none}
svg.spark{color:var(--ok);vertical-align:middle}
svg.spark.bad{color:var(--bad)}
.big{font-size:16px}
form.confirm{display:flex;gap:10px;align-items:center;flex-wrap:wrap}
@media (max-width:600px){main{padding:10px 8px 30px}.card{padding:10px}header.top{padding:8px 10px}header.top .who{margin-left:0;width:100%}}
`;
