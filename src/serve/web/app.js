// serve's page (the library's, for any model): four views over the JSON API of docs/serve.md (the
// attention view only when the model has one). No library, no build step: the charts and heat maps
// are drawn on canvases here.
'use strict';

const WORDS = {
  en: {
    tab_sample: 'Sample', tab_attention: 'Attention', tab_training: 'Training', prompt: 'Prompt',
    n: 'Characters', temperature: 'Temperature', seed: 'Seed', generate: 'Generate', show: 'Show', stop: 'Stop',
    hover_hint: 'Hover a generated character to see the distribution it was drawn from.',
    attn_hint: 'Row: the character that looks (query); column: the one it looks at (key). The future is masked: blank. Click a head to enlarge it.',
    loss_title: 'Loss (per step, train and val evaluations; dashed: ln V, a uniform guess)',
    lr_title: 'Learning rate', grad_title: 'Gradient norm per layer (dynamics.csv)',
    update_title: 'Update / weight ratio per layer (dynamics.csv)', close_hint: 'Click anywhere to close.',
    layer: 'Layer', head: 'head', entropy: 'entropy', iteration: 'iteration', training: 'training now',
    idle: 'not training', generating: 'generating…', done: 'done', chars: 'characters', no_dynamics:
    'no dynamics.csv: train with --log-dynamics to see these', rows: 'rows', drawn: 'drawn',
    'previous character': 'previous character', 'self (diagonal)': 'self (diagonal)',
    'first position (sink)': 'first position (sink)', uniform: 'uniform', mixed: 'mixed',
    tab_report: 'Report', checkpoints: 'checkpoints',
    no_report: 'No report.md yet: a run writes it when it ends.',
  },
  zh: {
    tab_sample: '采样', tab_attention: '注意力', tab_training: '训练', prompt: '提示',
    n: '字符数', temperature: '温度', seed: '种子', generate: '生成', show: '显示', stop: '停止',
    hover_hint: '把鼠标移到生成的字符上，可以看到它是从哪个分布中抽出来的。',
    attn_hint: '行：发出查询的字符（query）；列：被关注的字符（key）。未来被遮住：空白。点击一个头可放大。',
    loss_title: '损失（每步；训练集和验证集的评估；虚线：ln V，均匀猜测）',
    lr_title: '学习率', grad_title: '每层的梯度范数（dynamics.csv）',
    update_title: '每层的更新量 / 权重之比（dynamics.csv）', close_hint: '点击任意处关闭。',
    layer: '第几层', head: '头', entropy: '熵', iteration: '迭代', training: '正在训练',
    idle: '未在训练', generating: '生成中…', done: '完成', chars: '个字符', no_dynamics:
    '没有 dynamics.csv：训练时加 --log-dynamics 才能看到', rows: '行', drawn: '抽中',
    'previous character': '前一个字符', 'self (diagonal)': '自身（对角线）',
    'first position (sink)': '第一个位置（汇点）', uniform: '均匀', mixed: '混合',
    tab_report: '报告', checkpoints: '个检查点',
    no_report: '还没有 report.md：运行结束时才写。',
  },
};
let lang = localStorage.getItem('lang') || (navigator.language.startsWith('zh') ? 'zh' : 'en');
const t = (k) => (WORDS[lang] && WORDS[lang][k]) || WORDS.en[k] || k;
const $ = (id) => document.getElementById(id);

function applyLang() {
  document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
  document.querySelectorAll('[data-i18n]').forEach((el) => { el.textContent = t(el.dataset.i18n); });
  $('lang').textContent = lang === 'zh' ? 'English' : '中文';
  if (lastAttention) drawAttention(lastAttention);
  if (views.training) refreshTraining();
  if (views.report) refreshReport();
}

// --- views ---

const views = { sample: true, attention: false, training: false, report: false };
function show(name) {
  for (const v of Object.keys(views)) {
    views[v] = v === name;
    $('view-' + v).classList.toggle('hidden', !views[v]);
  }
  document.querySelectorAll('.tab').forEach((b) => b.classList.toggle('active', b.dataset.view === name));
  if (name === 'training') refreshTraining();
  if (name === 'attention' && !lastAttention) runAttention();
  if (name === 'report') refreshReport();
}

async function api(path, body) {
  const r = await fetch(path, body === undefined ? {} : { method: 'POST', body: JSON.stringify(body),
    headers: { 'Content-Type': 'application/json' } });
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.status);
  return j;
}

let run = null;
async function refreshRun() {
  try {
    run = await api('/api/run');
    if (run.program) {   // the program whose model this is; a model without attention has no such view
      $('program').textContent = run.program;
      document.title = `${run.program} serve`;
    }
    $('tab-attention').classList.toggle('hidden', run.attention === false);
    $('run-line').textContent = `${run.checkpoint || ''} · ${t('iteration')} ${run.iter} · ` +
      (run.training ? t('training') : t('idle'));
  } catch (e) { $('run-line').textContent = String(e.message); }
}

// --- sample ---

let sampling = null;   // the AbortController of the generation in progress
const tokens = [];

function setStatus(id, text, error) {
  $(id).textContent = text;
  $(id).classList.toggle('error', !!error);
}

function addToken(tok) {
  const span = document.createElement('span');
  span.className = 'tok';
  span.textContent = tok.c;
  span.dataset.i = tokens.length;
  tokens.push(tok);
  $('output').appendChild(span);
}

// the server-sent events of a POST: "event: X\ndata: {...}\n\n"
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const ev = /^event: (.*)$/m.exec(block), data = /^data: (.*)$/m.exec(block);
      if (ev && data) onEvent(ev[1], JSON.parse(data[1]));
    }
  }
}

async function runSample(e) {
  e.preventDefault();
  if (sampling) { sampling.abort(); return; }
  const body = { prompt: $('prompt').value, n: +$('n').value, temperature: +$('temperature').value,
    seed: +$('seed').value };
  if ($('top_k').value) body.top_k = +$('top_k').value;
  tokens.length = 0;
  $('output').innerHTML = '';
  const p = document.createElement('span');
  p.className = 'prompt';
  p.textContent = body.prompt;
  $('output').appendChild(p);
  sampling = new AbortController();
  $('go').textContent = t('stop');
  setStatus('sample-status', t('generating'));
  try {
    const r = await fetch('/api/sample', { method: 'POST', body: JSON.stringify(body), signal: sampling.signal,
      headers: { 'Content-Type': 'application/json' } });
    if (!r.ok) throw new Error((await r.json()).error);
    await readEvents(r, (ev, d) => {
      if (ev === 'token') addToken(d);
      else if (ev === 'done') setStatus('sample-status', `${t('done')}: ${d.n} ${t('chars')}, ${d.checkpoint}`);
      else if (ev === 'error') setStatus('sample-status', d.error, true);
    });
  } catch (err) {
    if (err.name !== 'AbortError') setStatus('sample-status', err.message, true);
  } finally {
    sampling = null;
    $('go').textContent = t('generate');
  }
}

function showDist(ev) {
  const el = ev.target.closest('.tok');
  const box = $('dist');
  if (!el) { box.classList.add('hidden'); return; }
  const tok = tokens[+el.dataset.i];
  const label = (c) => (c === '\n' ? '\\n' : c === ' ' ? '␣' : c === '\t' ? '\\t' : c);
  box.innerHTML = tok.top.map((x) => `<div class="row${x.c === tok.c ? ' drawn' : ''}"><code>${
    escapeHtml(label(x.c))}</code><div class="bar" style="width:${(100 * x.p).toFixed(1)}%"></div><span>${
    (100 * x.p).toFixed(1)}%</span></div>`).join('') + `<div class="hint">${t('drawn')}: <code>${
    escapeHtml(label(tok.c))}</code></div>`;
  box.classList.remove('hidden');
  const r = el.getBoundingClientRect();
  box.style.left = Math.min(r.left, window.innerWidth - box.offsetWidth - 8) + 'px';
  box.style.top = (r.bottom + 6 + box.offsetHeight > window.innerHeight ? r.top - box.offsetHeight - 6
    : r.bottom + 6) + 'px';
}

function escapeHtml(s) {
  return s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
}

// --- attention ---

let lastAttention = null;

function heat(w) {   // 0: white, 1: deep blue
  const a = Math.max(0, Math.min(1, w)) ** 0.7;
  return `rgb(${Math.round(255 - 220 * a)},${Math.round(255 - 170 * a)},${Math.round(255 - 40 * a)})`;
}

// the head's weights into canvas, cell pixels a square; margin: room for the labels
function drawHead(canvas, head, T, cell, chars, margin) {
  canvas.width = margin + T * cell;
  canvas.height = margin + T * cell;
  const g = canvas.getContext('2d');
  g.fillStyle = '#f1f0ec';   // the masked future: blank
  g.fillRect(margin, margin, T * cell, T * cell);
  head.weights.forEach((row, i) => row.forEach((w, j) => {
    g.fillStyle = heat(w);
    g.fillRect(margin + j * cell, margin + i * cell, cell, cell);
  }));
  if (!margin) return;
  g.fillStyle = '#1d1d1f';
  g.font = `${Math.min(16, cell)}px monospace`;
  g.textAlign = 'center';
  g.textBaseline = 'middle';
  chars.forEach((c, k) => {
    g.fillText(c, margin + (k + 0.5) * cell, margin / 2);   // keys across the top
    g.fillText(c, margin / 2, margin + (k + 0.5) * cell);   // queries down the side
  });
}

function drawAttention(a) {
  const grid = $('attn-grid');
  grid.innerHTML = '';
  const cell = Math.max(3, Math.min(24, Math.floor(260 / a.T)));
  a.layers.forEach((heads, l) => {
    const row = document.createElement('div');
    row.className = 'attn-layer';
    row.innerHTML = `<h3>${t('layer')} ${l}</h3>`;
    heads.forEach((h) => {
      const box = document.createElement('div');
      box.className = 'head';
      box.innerHTML = `<p><b>${t('head')} ${h.head}</b> · ${t(h.pattern)} · ${t('entropy')} ${h.entropy.toFixed(2)}</p>`;
      const c = document.createElement('canvas');
      c.className = 'head-map';
      c.dataset.layer = l;
      c.dataset.head = h.head;
      c.dataset.t = a.T;
      c.dataset.cell = cell;
      drawHead(c, h, a.T, cell, a.chars, 0);
      box.appendChild(c);
      box.addEventListener('click', () => zoom(a, l, h));
      row.appendChild(box);
    });
    grid.appendChild(row);
  });
}

function zoom(a, l, h) {
  const cell = Math.max(10, Math.min(44, Math.floor(Math.min(window.innerWidth, window.innerHeight) * 0.75 / a.T)));
  $('zoom-title').textContent = `${t('layer')} ${l}, ${t('head')} ${h.head}: ${t(h.pattern)} · ${t('entropy')} ${
    h.entropy.toFixed(3)}`;
  drawHead($('zoom-canvas'), h, a.T, cell, a.chars, Math.max(cell, 20));
  $('zoom').classList.remove('hidden');
}

async function runAttention(e) {
  if (e) e.preventDefault();
  setStatus('attn-status', '');
  try {
    lastAttention = await api('/api/attention', { prompt: $('attn-prompt').value });
    drawAttention(lastAttention);
    setStatus('attn-status', `${lastAttention.T} ${t('chars')}, ${t('iteration')} ${lastAttention.iter}`);
  } catch (err) { setStatus('attn-status', err.message, true); }
}

// --- training: line charts on canvas ---

const COLORS = ['#2355c9', '#c2410c', '#15803d', '#7c3aed', '#b91c1c', '#0e7490', '#a16207', '#be185d', '#3f3f46'];

function niceTicks(lo, hi, n) {
  const step0 = (hi - lo) / n, mag = 10 ** Math.floor(Math.log10(step0 || 1));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= step0) || mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-12; v += step) out.push(v);
  return out;
}

// where each series' legend goes: rows that wrap at the canvas' width; returns the rows' height
function legend(g, series, L, W) {
  let x = L + 8, y = 22;
  for (const s of series) {
    const w = g.measureText(s.label).width + 40;
    if (x + w > W && x > L + 8) { x = L + 8; y += 24; }
    s.lx = x; s.ly = y;
    x += w;
  }
  return y + 14;
}

// series: [{label, color, x: [], y: [], dots}]; opts: {logy, hline: {y, label}}
function drawChart(canvas, series, opts = {}) {
  const g = canvas.getContext('2d'), W = canvas.width, H = canvas.height, L = 84, R = 36, B = 40;
  g.clearRect(0, 0, W, H);
  g.font = '19px system-ui, sans-serif';
  const T = legend(g, series, L, W) + 6;
  const f = opts.logy ? (v) => Math.log10(v) : (v) => v;
  const pts = series.flatMap((s) => s.y.map((y, i) => [s.x[i], y])).filter(([, y]) => y !== null &&
    (!opts.logy || y > 0));
  if (opts.hline) pts.push([pts.length ? pts[0][0] : 0, opts.hline.y]);
  if (!pts.length) return;
  let x0 = Math.min(...pts.map((p) => p[0])), x1 = Math.max(...pts.map((p) => p[0]));
  let y0 = Math.min(...pts.map((p) => f(p[1]))), y1 = Math.max(...pts.map((p) => f(p[1])));
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const px = (x) => L + (x - x0) / (x1 - x0) * (W - L - R), py = (y) => H - B - (f(y) - y0) / (y1 - y0) * (H - T - B);
  g.strokeStyle = '#d8d6d0';
  g.fillStyle = '#6b6b70';
  g.lineWidth = 1;
  g.textAlign = 'right';
  for (const v of niceTicks(y0, y1, 5)) {
    const y = H - B - (v - y0) / (y1 - y0) * (H - T - B);
    g.beginPath(); g.moveTo(L, y); g.lineTo(W - R, y); g.stroke();
    g.fillText(opts.logy ? (10 ** v).toPrecision(2) : +v.toPrecision(4), L - 6, y + 6);
  }
  g.textAlign = 'center';
  for (const v of niceTicks(x0, x1, 8)) g.fillText(String(v), px(v), H - B + 24);
  if (opts.hline) {
    g.setLineDash([6, 5]); g.strokeStyle = '#6b6b70';
    g.beginPath(); g.moveTo(L, py(opts.hline.y)); g.lineTo(W - R, py(opts.hline.y)); g.stroke();
    g.setLineDash([]); g.textAlign = 'right'; g.fillText(opts.hline.label, W - R - 4, py(opts.hline.y) - 8);
  }
  series.forEach((s) => drawSeries(g, s, px, py, opts.logy));
}

function drawSeries(g, s, px, py, logy) {
  g.strokeStyle = g.fillStyle = s.color;
  g.lineWidth = 2;
  g.beginPath();
  let on = false;
  s.x.forEach((x, i) => {
    const y = s.y[i];
    if (y === null || (logy && y <= 0)) { on = false; return; }
    if (s.dots) { g.fillRect(px(x) - 5, py(y) - 5, 10, 10); return; }
    if (on) g.lineTo(px(x), py(y)); else g.moveTo(px(x), py(y));
    on = true;
  });
  if (!s.dots) g.stroke();
  g.textAlign = 'left';
  g.fillRect(s.lx, s.ly - 8, 16, 5);
  g.fillText(s.label, s.lx + 20, s.ly);
}

function column(csv, name) {
  const k = csv.columns.indexOf(name);
  return k < 0 ? null : csv.rows.map((r) => r[k]);
}

function perLayer(csv, prefix) {
  return csv.columns.map((c, k) => [c, k]).filter(([c]) => c.startsWith(prefix)).map(([c, k], i) => ({
    label: c.replace(/^(grad|update)_/, ''), color: COLORS[i % COLORS.length], x: column(csv, 'iter'),
    y: csv.rows.map((r) => r[k]) }));
}

let trainTimer = null;
async function refreshTraining() {
  clearTimeout(trainTimer);
  try {
    const [m, d] = await Promise.all([api('/api/metrics'), api('/api/dynamics'), refreshRun()]);
    const it = column(m, 'iter') || [];
    const loss = $('chart-loss');
    loss.dataset.points = m.rows.length;   // what the browser test counts
    drawChart(loss, [
      { label: 'loss', color: COLORS[0], x: it, y: column(m, 'loss') || [] },
      { label: 'train', color: COLORS[2], x: it, y: column(m, 'train_loss') || [], dots: true },
      { label: 'val', color: COLORS[1], x: it, y: column(m, 'val_loss') || [], dots: true },
    ], run && run.vocab_size ? { hline: { y: Math.log(run.vocab_size), label: `ln V = ln ${run.vocab_size}` } } : {});
    drawChart($('chart-lr'), [{ label: 'lr', color: COLORS[3], x: it, y: column(m, 'lr') || [] }]);
    for (const [id, prefix] of [['chart-grad', 'grad_'], ['chart-update', 'update_']]) {
      const c = $(id);
      if (d.missing || !d.rows.length) {
        const g = c.getContext('2d');
        g.clearRect(0, 0, c.width, c.height);
        g.fillStyle = '#6b6b70'; g.font = '18px system-ui, sans-serif'; g.fillText(t('no_dynamics'), 20, 40);
      } else {
        drawChart(c, perLayer(d, prefix), { logy: true });
      }
    }
    setStatus('train-status', `${m.rows.length} ${t('rows')} · ` + (run && run.training ? t('training') : t('idle')));
  } catch (err) { setStatus('train-status', err.message, true); }
  if (views.training) trainTimer = setTimeout(refreshTraining, run && run.training ? 2000 : 10000);
}

// --- report: the run's report.md, its pictures and checkpoints (the library's trainer writes them) ---

async function refreshReport() {
  try {
    const [r] = await Promise.all([api('/api/report'), refreshRun()]);
    $('report-text').textContent = r.missing ? t('no_report') : r.text;
    const box = $('report-pictures');
    box.innerHTML = '';
    for (const name of (run && run.pictures) || []) {
      const fig = document.createElement('figure');
      const cap = document.createElement('figcaption');
      const img = document.createElement('img');
      cap.textContent = name;
      img.src = '/api/pictures/' + name;   // served no-store: the picture as it is now
      img.alt = name;
      fig.append(cap, img);
      box.appendChild(fig);
    }
    const ckpts = (run && run.checkpoints) || [];
    setStatus('report-status', `${ckpts.length} ${t('checkpoints')}: ${ckpts.join(', ')}`);
  } catch (err) { setStatus('report-status', err.message, true); }
}

// --- wiring ---

document.querySelectorAll('.tab').forEach((b) => b.addEventListener('click', () => show(b.dataset.view)));
$('lang').addEventListener('click', () => {
  lang = lang === 'zh' ? 'en' : 'zh';
  localStorage.setItem('lang', lang);
  applyLang();
});
$('sample-form').addEventListener('submit', runSample);
$('attn-form').addEventListener('submit', runAttention);
$('output').addEventListener('mouseover', showDist);
$('output').addEventListener('mouseleave', () => $('dist').classList.add('hidden'));
$('zoom').addEventListener('click', () => $('zoom').classList.add('hidden'));
applyLang();
refreshRun();
