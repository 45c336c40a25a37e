/* The HTML report's script (runner/report_html.c embeds it): draws the curves with uPlot, the heat
 * maps and the memory bars on canvases, from the JSON object in #report-data. Each plot says it drew
 * in data-drawn (the points, rows or bars it drew), which the browser test reads. */
(function () {
  'use strict';
  var started = performance.now();
  var D = JSON.parse(document.getElementById('report-data').textContent);
  var R = D.report;
  var COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22'];
  var tip = document.getElementById('tip');

  function showTip(ev, text) {
    tip.textContent = text;
    tip.style.display = 'block';
    tip.style.left = (ev.clientX + 12) + 'px';
    tip.style.top = (ev.clientY + 12) + 'px';
  }
  function hideTip() { tip.style.display = 'none'; }

  /* ---- loss and grad norm ---------------------------------------------------------------- */
  function column(rows, k) { /* [[it, loss, gn]] -> {it: value} */
    var m = {};
    (rows || []).forEach(function (r) { if (r[k] !== null && r[k] !== undefined) m[r[0]] = r[k]; });
    return m;
  }

  function curves(k, el, title) {
    var n = R.train_iters, xs = [], sets = [], labels = [], colors = [], i;
    for (i = 1; i <= n; i++) xs.push(i);
    var ref = D.reference_metrics ? column(D.reference_metrics, k) : {};
    if (!D.reference_metrics && k === 1 && R.reference_losses)
      R.reference_losses.forEach(function (v, it) { if (it > 0 && v !== null) ref[it] = v; });
    /* each plot's fault-free line has a colour of its own: the browser test finds it in the screenshot */
    if (Object.keys(ref).length) { sets.push(ref); labels.push('fault-free'); colors.push(k === 1 ? '#3d0066' : '#004d40'); }
    var resumes = {};
    R.attempts.forEach(function (a, j) {
      var m = D.attempt_metrics && D.attempt_metrics[j] ? column(D.attempt_metrics[j], k) : {};
      if (!D.attempt_metrics || !D.attempt_metrics[j]) { /* the report's losses: the run as completed */
        if (k === 1 && R.losses && j === R.attempts.length - 1)
          R.losses.forEach(function (v, it) { if (it > a.start_iteration && v !== null) m[it] = v; });
      }
      if (a.start_iteration > 0) {
        var base = sets.length ? sets[0] : m;
        if (base[a.start_iteration] !== undefined) resumes[a.start_iteration] = base[a.start_iteration];
      }
      if (Object.keys(m).length) {
        sets.push(m); labels.push('attempt #' + a.index); colors.push(COLORS[j % COLORS.length]);
      }
    });
    if (D.compare) {
      var c = column(D.compare.metrics, k);
      if (Object.keys(c).length) { sets.push(c); labels.push('real run'); colors.push('#ff7f0e'); }
      D.compare.metrics.forEach(function (r) { if (xs.indexOf(r[0]) < 0 && r[0] > 0) xs.push(r[0]); });
      xs.sort(function (a, b) { return a - b; });
    }
    var data = [xs], series = [{ label: 'iteration' }], drawn = 0;
    sets.forEach(function (m, j) {
      data.push(xs.map(function (x) { if (m[x] !== undefined) { drawn++; return m[x]; } return null; }));
      series.push({ label: labels[j], stroke: colors[j], width: j === 0 ? 3 : 1.5, dash: j === 0 ? [] : [6, 3],
        points: { show: true, size: 5 } });
    });
    if (Object.keys(resumes).length) {
      data.push(xs.map(function (x) { return resumes[x] !== undefined ? resumes[x] : null; }));
      series.push({ label: 'resumed here', stroke: '#d62728', paths: function () { return null; },
        points: { show: true, size: 14, width: 2, fill: 'transparent' } });
    }
    el.dataset.series = sets.length;
    if (!drawn) {
      el.textContent = 'No ' + title + ' recorded (run the scenario with --html to keep every run\'s metrics).';
      el.dataset.drawn = 0;
      return;
    }
    new uPlot({ title: title, width: 600, height: 300, series: series,
      scales: { x: { time: false } }, axes: [{ label: 'iteration' }, { size: 70 }] }, data, el);
    el.dataset.drawn = drawn;
  }

  /* ---- heat maps ------------------------------------------------------------------------- */
  var STATES = [['none', '#ffffff'], ['busy', '#4c9be8'], ['waiting', '#f2c14e'], ['hung', '#d1495b'],
    ['dead', '#222222'], ['running (not traced)', '#d5d5d5']];
  var legend = document.getElementById('heat-legend');
  STATES.slice(1).forEach(function (s) {
    var sp = document.createElement('span'), i = document.createElement('i');
    i.style.background = s[1];
    sp.appendChild(i); sp.appendChild(document.createTextNode(s[0]));
    legend.appendChild(sp);
  });
  var RGB = STATES.map(function (s) {
    return [parseInt(s[1].substr(1, 2), 16), parseInt(s[1].substr(3, 2), 16), parseInt(s[1].substr(5, 2), 16)];
  });

  function decode(row, cols) {
    var out = new Uint8Array(cols), c = 0, re = /([a-f])(\d+)/g, m;
    while ((m = re.exec(row)) !== null) {
      var s = m[1].charCodeAt(0) - 97, n = +m[2];
      for (var k = 0; k < n && c < cols; k++) out[c++] = s;
    }
    return out;
  }

  function fmt(t) { return t >= 100 ? t.toFixed(0) + ' s' : t >= 1 ? t.toFixed(2) + ' s' : (t * 1000).toFixed(2) + ' ms'; }

  function heatmap(h, host) {
    var world = h.world, cols = h.cols, rows = h.rows.map(function (r) { return decode(r, cols); });
    var img = document.createElement('canvas');
    img.width = cols; img.height = world;
    var ictx = img.getContext('2d'), id = ictx.createImageData(cols, world);
    for (var r = 0; r < world; r++) {
      var row = rows[h.rank_row[r]];
      for (var c = 0; c < cols; c++) {
        var p = (r * cols + c) * 4, rgb = RGB[row[c]];
        id.data[p] = rgb[0]; id.data[p + 1] = rgb[1]; id.data[p + 2] = rgb[2]; id.data[p + 3] = 255;
      }
    }
    ictx.putImageData(id, 0, 0);
    var a = R.attempts[h.attempt] || {};
    var box = document.createElement('div');
    box.className = 'heat';
    var t = document.createElement('h3');
    t.textContent = 'attempt #' + h.attempt + ': iterations ' + a.start_iteration + ' \u2192 ' + a.end_iteration +
      ', ' + fmt(h.end_s) + ' simulated; ' + (a.cause || '');
    box.appendChild(t);
    var cv = document.createElement('canvas');
    var L = 64, B = 34, W = 1100, H = world > 256 ? 512 : Math.max(world * 4, 96);
    cv.width = W + L + 10; cv.height = H + B + 6;
    cv.className = 'heat-canvas';
    box.appendChild(cv);
    if (h.dropped_events > 0) {
      var note = document.createElement('p');
      note.className = 'note';
      note.textContent = 'The trace kept each rank\'s newest spans and summarized the ' + h.dropped_events +
        ' older ones: before its newest spans a rank\'s row shows its busy and waiting time over short ' +
        'stretches; grey is time the rank ran of which the trace kept nothing.';
      box.appendChild(note);
    }
    host.appendChild(box);
    var view = { c0: 0, c1: cols, r0: 0, r1: world };
    var ctx = cv.getContext('2d');
    function colOf(time) {
      for (var i = 0; i < h.segments.length; i++) {
        var g = h.segments[i];
        if (time >= g.t0 && time <= g.t1)
          return g.c0 + (g.t1 > g.t0 ? (time - g.t0) / (g.t1 - g.t0) : 0) * (g.c1 - g.c0);
      }
      return time < 0 ? 0 : cols;
    }
    function timeOf(col) {
      for (var i = 0; i < h.segments.length; i++) {
        var g = h.segments[i];
        if (col >= g.c0 && col <= g.c1) return g.t0 + (col - g.c0) / (g.c1 - g.c0) * (g.t1 - g.t0);
      }
      return h.end_s;
    }
    function X(col) { return L + (col - view.c0) / (view.c1 - view.c0) * W; }
    function Y(rank) { return (rank - view.r0) / (view.r1 - view.r0) * H; }
    function draw() {
      ctx.clearRect(0, 0, cv.width, cv.height);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(img, view.c0, view.r0, view.c1 - view.c0, view.r1 - view.r0, L, 0, W, H);
      ctx.font = '11px sans-serif';
      ctx.fillStyle = '#333';
      h.segments.forEach(function (g) { /* breaks hatched, their length said */
        if (g.c1 < view.c0 || g.c0 > view.c1) return;
        if (g['break']) {
          ctx.save();
          ctx.strokeStyle = 'rgba(255,255,255,0.8)';
          ctx.beginPath();
          for (var y = -W; y < H; y += 8) { ctx.moveTo(X(g.c0), y); ctx.lineTo(X(g.c1), y + (X(g.c1) - X(g.c0))); }
          ctx.stroke();
          ctx.restore();
          ctx.fillText('\u22ef' + fmt(g.t1 - g.t0) + '\u22ef', X(g.c0) - 12, H + 26);
        }
      });
      var ticks = 8;
      for (var i = 0; i <= ticks; i++) {
        var col = view.c0 + (view.c1 - view.c0) * i / ticks;
        ctx.fillRect(X(col), H, 1, 4);
        ctx.fillText(fmt(timeOf(col)), Math.min(X(col) - 10, L + W - 50), H + 14);
      }
      var g = R.gpus_per_node || 8, step = Math.max(1, Math.ceil((view.r1 - view.r0) / 16 / g) * g);
      for (var r = Math.ceil(view.r0 / step) * step; r < view.r1; r += step) {
        ctx.fillRect(L - 4, Y(r), 4, 1);
        ctx.fillText('rank ' + r, 2, Y(r) + 10);
      }
      (R.faults || []).forEach(function (f, i) { /* where and when each fault struck, and its detection */
        if (f.attempt !== h.attempt || f.fired_at === null) return;
        var lo = f.rank >= 0 ? f.rank : f.node >= 0 ? f.node * g : 0;
        var hi = f.rank >= 0 ? f.rank + 1 : f.node >= 0 ? (f.node + 1) * g : world;
        var x = X(colOf(f.fired_at)), y0 = Y(lo), y1 = Math.max(Y(hi), y0 + 3);
        ctx.fillStyle = '#e00000';
        ctx.fillRect(x - 1, y0, 3, y1 - y0);
        ctx.beginPath(); ctx.moveTo(x, y0); ctx.lineTo(x - 7, y0 - 9); ctx.lineTo(x + 7, y0 - 9); ctx.fill();
        ctx.fillText('fault ' + (i + 1) + ' (' + f.kind + ')', x + 8, Math.max(y0 - 2, 10));
        if (f.detect_seconds !== null) {
          var xd = X(colOf(f.fired_at + f.detect_seconds));
          ctx.save(); ctx.strokeStyle = '#e00000'; ctx.setLineDash([5, 4]);
          ctx.beginPath(); ctx.moveTo(xd, 0); ctx.lineTo(xd, H); ctx.stroke(); ctx.restore();
          ctx.fillText('detected ' + (i + 1), Math.min(xd + 3, L + W - 60), H - 4);
        }
        ctx.fillStyle = '#333';
      });
    }
    draw();
    cv.dataset.drawn = world;
    var drag = null;
    function at(ev) {
      var b = cv.getBoundingClientRect();
      var x = (ev.clientX - b.left) * cv.width / b.width, y = (ev.clientY - b.top) * cv.height / b.height;
      return { c: view.c0 + (x - L) / W * (view.c1 - view.c0), r: view.r0 + y / H * (view.r1 - view.r0), x: x, y: y };
    }
    cv.addEventListener('mousedown', function (ev) { drag = at(ev); });
    cv.addEventListener('mouseup', function (ev) {
      var e = at(ev);
      if (drag && Math.abs(e.x - drag.x) > 4 && Math.abs(e.y - drag.y) > 4) {
        view = { c0: Math.max(0, Math.min(drag.c, e.c)), c1: Math.min(cols, Math.max(drag.c, e.c)),
          r0: Math.max(0, Math.min(drag.r, e.r)), r1: Math.min(world, Math.max(drag.r, e.r)) };
        draw();
      }
      drag = null;
    });
    cv.addEventListener('dblclick', function () { view = { c0: 0, c1: cols, r0: 0, r1: world }; draw(); });
    cv.addEventListener('mouseleave', hideTip);
    cv.addEventListener('mousemove', function (ev) {
      var e = at(ev), r = Math.floor(e.r), c = Math.floor(e.c);
      if (e.x < L || r < 0 || r >= world || c < 0 || c >= cols) return hideTip();
      showTip(ev, 'rank ' + r + ' (node ' + Math.floor(r / (R.gpus_per_node || 8)) + '), ' + fmt(timeOf(c)) + ' to ' +
        fmt(timeOf(c + 1)) + ': ' + STATES[rows[h.rank_row[r]][c]][0]);
    });
  }

  /* ---- memory ---------------------------------------------------------------------------- */
  function memory(el) {
    var parts = [['weights', '#1b9e77'], ['gradients', '#d95f02'], ['optimizer', '#7570b3'],
      ['activations', '#e7298a']];
    var stages = D.memory || [], cap = R.capacity_bytes, MB = 1048576;
    var rowsN = stages.length + 1, W = 900, L = 170, rowH = 30;
    var note = document.createElement('p');
    note.className = 'note';
    note.textContent = (stages.length ? 'Stages whose ranks logged their memory split (job.log\'s [memory] lines: ' +
      'each pipeline stage\'s first rank, and the reporting rank); ' : 'No per-stage split was logged; ') +
      'the bottom bar is the largest device peak of any rank against the device\'s capacity.';
    el.appendChild(note);
    var cv = document.createElement('canvas');
    cv.width = L + W + 220; cv.height = rowsN * rowH + 40;
    el.appendChild(cv);
    var ctx = cv.getContext('2d'), max = 1;
    stages.forEach(function (s) { max = Math.max(max, s.peak, s.weights + s.gradients + s.optimizer + s.activations); });
    ctx.font = '12px sans-serif';
    stages.forEach(function (s, i) {
      var y = i * rowH + 4, x = L;
      ctx.fillStyle = '#333';
      ctx.fillText('stage ' + s.stage + ' (rank ' + s.rank + ')', 4, y + 15);
      parts.forEach(function (p) {
        var w = s[p[0]] / max * W;
        ctx.fillStyle = p[1]; ctx.fillRect(x, y, w, rowH - 8); x += w;
      });
      ctx.fillStyle = '#000'; ctx.fillRect(L + s.peak / max * W, y - 2, 2, rowH - 4);
      ctx.fillText((s.peak / MB).toFixed(1) + ' MiB peak' + (cap ? ', ' + (100 * s.peak / cap).toFixed(2) +
        '% of capacity' : ''), L + W + 8, y + 15);
    });
    var y = stages.length * rowH + 4;
    ctx.fillStyle = '#333';
    ctx.fillText('largest peak / capacity', 4, y + 15);
    ctx.strokeStyle = '#999'; ctx.strokeRect(L, y, W, rowH - 8);
    var frac = cap ? Math.min(1, R.peak_bytes / cap) : 0;
    ctx.fillStyle = R.peak_bytes > cap ? '#b3261e' : '#555';
    ctx.fillRect(L, y, Math.max(2, frac * W), rowH - 8);
    ctx.fillStyle = '#333';
    ctx.fillText((R.peak_bytes / MB).toFixed(1) + ' of ' + (cap / MB).toFixed(0) + ' MiB', L + W + 8, y + 15);
    var lx = L;
    parts.forEach(function (p) {
      ctx.fillStyle = p[1]; ctx.fillRect(lx, rowsN * rowH + 12, 12, 12);
      ctx.fillStyle = '#333'; ctx.fillText(p[0], lx + 16, rowsN * rowH + 22); lx += 110;
    });
    ctx.fillRect(lx, rowsN * rowH + 10, 2, 16); ctx.fillText('device peak', lx + 6, rowsN * rowH + 22);
    cv.dataset.drawn = rowsN;
  }

  curves(1, document.getElementById('plot-loss'), 'lm loss');
  curves(2, document.getElementById('plot-grad'), 'grad norm');
  var host = document.getElementById('heatmaps');
  if (!D.heat.length) {
    host.textContent = 'No traces in the work folder (scenario run --html keeps one per attempt).';
    host.dataset.drawn = 0;
  }
  D.heat.forEach(function (h) { heatmap(h, host); });
  memory(document.getElementById('memory-plot'));
  document.body.dataset.height = document.documentElement.scrollHeight;
  document.body.dataset.renderMs = (performance.now() - started).toFixed(0);
  document.body.dataset.rendered = 'true';
}());
