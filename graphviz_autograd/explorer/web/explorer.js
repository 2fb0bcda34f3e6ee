// The explorer page: draws one level of a backward graph at a time from the data the
// Python side embedded (graphviz_autograd/explore.py), moves between levels, searches,
// highlights and colours. Layout comes with the data; every name reaches the page
// through textContent or an attribute value, never as markup.
(function () {
  'use strict';

  var SVG_NS = 'http://www.w3.org/2000/svg';
  var data = JSON.parse(document.getElementById('graph-data').textContent);
  var nodes = data.nodes;
  var levels = data.levels;
  var templates = data.templates;
  var ROOT = 0;
  var EXPANDED_HASH = '&expanded';
  var SEVERITY_RANK = { error: 0, warning: 1, info: 2 };
  // What the page can colour by: the overlays, as the static drawing colours by them.
  // An edge is [source, target, kind, shape]; it is read by the names the data gives those places.
  var EDGE = {};
  data.edge_fields.forEach(function (name, i) { EDGE[name] = i; });
  var OVERLAYS = {};
  (data.overlays || []).forEach(function (overlay) { OVERLAYS[overlay.name] = overlay; });
  // Light to dark: the same blues as the static drawings' gradient scale.
  var SCALE = ['#f7fbff', '#deebf7', '#c6dbef', '#9ecae1', '#6baed6', '#4292c6', '#2171b5', '#08519c', '#08306b'];

  // The parts of the page (explorer.html), by their ids.
  function part(id) { return document.getElementById(id); }
  var canvas = part('canvas'), breadcrumb = part('breadcrumb'), levelNote = part('level-note');
  var details = part('details'), legend = part('legend'), table = part('table'), expandButton = part('expand');
  var searchBox = part('search'), hitsSection = part('hits-section'), hitsList = part('hits'), hitsTitle = part('hits-title');
  var metricSelect = part('metric');

  // --- derived once ---------------------------------------------------------------

  var levelByPath = new Map();
  levels.forEach(function (level, index) { levelByPath.set(level.path, index); });

  // Where each level sits in its parent: the box (item index) and the whole run it is folded with.
  var placeInParent = new Array(levels.length);
  levels.forEach(function (level, index) {
    var template = templates[level.template];
    template.items.forEach(function (item, i) {
      if (item.kind !== 'box') return;
      level.refs[i].forEach(function (child) { placeInParent[child] = { item: i, run: level.refs[i] }; });
    });
  });

  function ancestors(level) {  // the level and every level above it, innermost first
    var chain = [];
    for (var l = level; l >= 0; l = levels[l].parent) chain.push(l);
    return chain;
  }

  // Per level, everything below it: ops, findings by severity, numbers rolled up.
  var opsBelow = new Array(levels.length).fill(0);
  nodes.forEach(function (node) {
    if (node.kind === 'op') ancestors(node.level).forEach(function (l) { opsBelow[l] += 1; });
  });

  var findingsOf = new Map();  // node index -> findings
  var badges = levels.map(function () { return { error: 0, warning: 0 }; });
  var looseFindings = [];
  data.findings.forEach(function (finding) {
    if (!finding.nodes.length) looseFindings.push(finding);
    var touched = new Set();
    finding.nodes.forEach(function (k) {
      if (!findingsOf.has(k)) findingsOf.set(k, []);
      findingsOf.get(k).push(finding);
      ancestors(nodes[k].level).forEach(function (l) { touched.add(l); });
    });
    if (finding.severity in badges[0]) touched.forEach(function (l) { badges[l][finding.severity] += 1; });
  });

  // An overlay measured over training steps holds a value per step for each node: the
  // step axis (data.steps) chooses which step colours the page.
  var STEPS = data.steps || [];
  var stepIndex = STEPS.length - 1;
  var metrics = {};
  function metricOf(name, values) {
    var perNode = new Map();
    var perLevel = new Array(levels.length).fill(null);
    Object.keys(values).forEach(function (key) {
      var k = Number(key);
      var value = values[key] === 'nan' ? NaN : values[key];
      perNode.set(k, value);
      ancestors(nodes[k].level).forEach(function (l) {
        perLevel[l] = rollUp(name, perLevel[l], value);
      });
    });
    return { perNode: perNode, perLevel: perLevel, count: perNode.size };
  }
  function atStep(values) {
    var found = {};
    Object.keys(values).forEach(function (key) {
      var value = values[key][stepIndex];
      if (value !== null && value !== undefined) found[key] = value;
    });
    return found;
  }
  function buildMetrics() {
    Object.keys(data.metrics).forEach(function (name) {
      var stepped = OVERLAYS[name] && OVERLAYS[name].stepped;
      metrics[name] = metricOf(name, stepped ? atStep(data.metrics[name]) : data.metrics[name]);
    });
  }
  buildMetrics();
  (data.overlays || []).forEach(function (overlay) {
    var option = element('option', { value: overlay.name },
      overlay.title + (overlay.rollup === 'max' ? ' (max)' : overlay.rollup === 'sum' ? ' (sum)' : ''));
    if (!(metrics[overlay.name] && metrics[overlay.name].count)) option.disabled = true;
    metricSelect.appendChild(option);
  });
  // A diff's page opens coloured by its states.
  var diffOverlay = (data.overlays || []).filter(function (o) { return o.scale === 'diff'; })[0];
  if (diffOverlay) metricSelect.value = diffOverlay.name;
  var stepInput = null;
  var stepText = null;
  if (STEPS.length) {
    // The page opens coloured by the first statistic measured over the steps.
    var firstStepped = (data.overlays || []).filter(function (o) { return o.stepped && metrics[o.name].count; })[0];
    if (firstStepped) metricSelect.value = firstStepped.name;
    var stepLabel = element('label', { id: 'step-label' }, 'step ');
    stepInput = element('input', {
      type: 'range', id: 'step', min: '0', max: String(STEPS.length - 1), value: String(stepIndex),
      'aria-label': 'Training step ([ and ] step through)',
    });
    stepText = element('span', { id: 'step-value' }, String(STEPS[stepIndex]));
    stepLabel.appendChild(stepInput);
    stepLabel.appendChild(stepText);
    metricSelect.parentNode.parentNode.insertBefore(stepLabel, metricSelect.parentNode);
  }

  var inputsOf = null;
  var outputsOf = null;
  function adjacency() {
    if (inputsOf) return;
    inputsOf = nodes.map(function () { return []; });
    outputsOf = nodes.map(function () { return []; });
    data.edges.forEach(function (edge, e) {
      outputsOf[edge[EDGE.source]].push(e);
      inputsOf[edge[EDGE.target]].push(e);
    });
  }

  // --- text ---------------------------------------------------------------------------

  function countText(count) {
    var units = [[1e9, 'B'], [1e6, 'M'], [1e3, 'k']];
    for (var i = 0; i < units.length; i++) {
      if (count >= units[i][0]) return (count / units[i][0]).toFixed(1).replace(/\.0$/, '') + units[i][1];
    }
    return String(count);
  }
  function plural(count, word) { return count + ' ' + word + (count === 1 ? '' : 's'); }
  function bytesText(size) {
    if (size < 1024) return size + ' B';
    var units = ['KiB', 'MiB', 'GiB', 'TiB'];
    for (var i = 0; i < units.length; i++) {
      size /= 1024;
      if (size < 1024 || i === units.length - 1) return size.toFixed(1) + ' ' + units[i];
    }
    return String(size);
  }
  function secondsText(seconds) {
    var units = [[1, 's'], [1e-3, 'ms'], [1e-6, '\u00b5s']];
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(seconds) >= units[i][0] || i === units.length - 1) return (seconds / units[i][0]).toFixed(2) + ' ' + units[i][1];
    }
    return String(seconds);
  }
  function metricText(name, value) {
    if (value === null || value === undefined) return '';
    if (isNaN(value)) return 'NaN/Inf';
    if (OVERLAYS[name] && OVERLAYS[name].scale === 'diff') return diffState(value);
    var unit = OVERLAYS[name] ? OVERLAYS[name].unit : '';
    return unit === 'B' ? bytesText(value) : unit === 's' ? secondsText(value) : value.toPrecision(3);
  }
  function levelName(l) { return l === ROOT ? data.title : levels[l].path; }
  function tail(path, parentPath) {
    return parentPath && path.indexOf(parentPath + '.') === 0 ? path.slice(parentPath.length + 1) : path;
  }

  function element(tag, attrs, text) {
    var made = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (key) { made.setAttribute(key, attrs[key]); });
    if (text !== undefined) made.textContent = text;
    return made;
  }
  function svgElement(tag, attrs, text) {
    var made = document.createElementNS(SVG_NS, tag);
    if (attrs) Object.keys(attrs).forEach(function (key) { made.setAttribute(key, attrs[key]); });
    if (text !== undefined) made.textContent = text;
    return made;
  }

  // --- state ----------------------------------------------------------------------------

  var current = -1;
  var expanded = false;  // the current level drawn with every module inside it opened
  var view = null;  // what is drawn: see boxedView and expandedView
  var panZoom = null;
  var svg = null;
  var itemGroups = [];
  var edgeGroups = [];
  var clusterGroups = [];
  var selected = null;  // {kind: 'node'|'level', index}

  // --- what a level shows -------------------------------------------------------------
  // A view: items (template items), refs (per item: node index, outside node index for
  // a port, child levels for a box), alike (per node item: every node it stands for),
  // edges, layout and clusters (opened modules: their item and levels).

  function boxedView(level) {
    var template = templates[levels[level].template];
    var refs = levels[level].refs;
    return {
      level: level, expanded: false, items: template.items, labels: template.labels, refs: refs, edges: template.edges,
      layout: template.layout, clusters: [],
      alike: template.items.map(function (item, i) { return isNodeItem(item) ? [refs[i]] : []; }),
    };
  }

  function isNodeItem(item) { return item.kind !== 'box' && item.kind !== 'in' && item.kind !== 'out'; }

  // The expanded view: items are paths of item indexes down through boxes; a folded run
  // shows its first block, whose nodes stand for the matching ones of every block of it.
  function expandedView(level) {
    var template = templates[levels[level].template];
    var expandedData = template.expanded;
    function follow(path) {
      var inner = template;
      var holders = [level];
      for (var n = 0; n < path.length - 1; n++) {
        var box = path[n];
        var next = [];
        holders.forEach(function (l) { Array.prototype.push.apply(next, levels[l].refs[box]); });
        holders = next;
        inner = templates[inner.items[box].template];
      }
      return { item: inner.items[path[path.length - 1]], lines: inner.labels[path[path.length - 1]], holders: holders };
    }
    var items = [];
    var labels = [];
    var refs = [];
    var alike = [];
    expandedData.items.forEach(function (path) {
      var found = follow(path);
      var last = path[path.length - 1];
      items.push(found.item);
      labels.push(found.lines);
      if (isNodeItem(found.item)) {
        var all = found.holders.map(function (l) { return levels[l].refs[last]; });
        refs.push(all[0]);
        alike.push(all);
      } else {
        refs.push(levels[level].refs[last]);
        alike.push([]);
      }
    });
    var clusters = expandedData.clusters.map(function (entry) {
      var found = follow(entry[0]);
      var last = entry[0][entry[0].length - 1];
      var inside = [];
      found.holders.forEach(function (l) { Array.prototype.push.apply(inside, levels[l].refs[last]); });
      return { item: found.item, lines: found.lines, levels: inside, parent: entry[1] };
    });
    return {
      level: level, expanded: true, items: items, labels: labels, refs: refs, alike: alike, edges: expandedData.edges,
      layout: expandedData.layout, clusters: clusters,
    };
  }

  // Why a level cannot be expanded, or '' when it can.
  function cannotExpand(level) {
    var expandedData = templates[levels[level].template].expanded;
    if (!expandedData) return 'Nothing to expand: this level holds no module.';
    if (expandedData.skipped) {
      return 'Too big to expand all: ' + expandedData.skipped.toLocaleString('en') +
        ' nodes, more than this page lays out at once. Open a module instead.';
    }
    return '';
  }

  // --- drawing a level -----------------------------------------------------------------

  // An overlay's values meet on a module as the static drawing rolls them up: the sum, or
  // the largest (NaN the largest of all).
  function rollUp(name, total, value) {
    if (value === null) return total;
    if (OVERLAYS[name] && OVERLAYS[name].rollup === 'union') return (total || 0) | value;
    if (OVERLAYS[name] && OVERLAYS[name].rollup === 'max') return total === null || value > total || isNaN(value) ? value : total;
    return (total || 0) + value;
  }

  function itemMetric(i, name) {
    var metric = metrics[name];
    if (!metric) return null;
    var item = view.items[i];
    if (item.kind === 'in' || item.kind === 'out') return null;
    var total = null;
    if (item.kind === 'box') {
      view.refs[i].forEach(function (l) { total = rollUp(name, total, metric.perLevel[l]); });
    } else {
      view.alike[i].forEach(function (k) { total = rollUp(name, total, metric.perNode.has(k) ? metric.perNode.get(k) : null); });
    }
    return total;
  }

  function badgeCounts(inside) {
    var counts = { error: 0, warning: 0 };
    inside.forEach(function (l) { counts.error += badges[l].error; counts.warning += badges[l].warning; });
    return counts;
  }

  function drawBadge(group, counts, x, y) {
    var severity = counts.error ? 'error' : counts.warning ? 'warning' : null;
    if (!severity) return;
    var badge = svgElement('g', { class: 'badge ' + severity });
    badge.appendChild(svgElement('circle', { cx: x, cy: y, r: 8 }));
    badge.appendChild(svgElement('text', { x: x, y: y + 3 }, String(counts.error + counts.warning)));
    badge.appendChild(svgElement('title', {}, counts.error + ' errors, ' + counts.warning + ' warnings inside'));
    group.appendChild(badge);
  }

  function draw(shown) {
    view = shown;
    var level = shown.level;
    var layout = shown.layout;
    if (panZoom) { panZoom.destroy(); panZoom = null; }
    canvas.textContent = '';
    svg = svgElement('svg', { role: 'img', 'aria-label': 'level ' + levelName(level) + (shown.expanded ? ', expanded' : '') });
    var viewport = svgElement('g', { class: 'viewport' });
    svg.appendChild(viewport);
    var clusterLayer = svgElement('g', { class: 'clusters' });
    var edgeLayer = svgElement('g', { class: 'edges' });
    var nodeLayer = svgElement('g', { class: 'nodes' });
    viewport.appendChild(clusterLayer);
    viewport.appendChild(edgeLayer);
    viewport.appendChild(nodeLayer);
    clusterGroups = shown.clusters.map(function (cluster, c) {
      var box = layout.clusters[c];
      var group = svgElement('g', { class: 'cluster', 'data-cluster': String(c) });
      group.appendChild(svgElement('rect', { x: box[0], y: box[1], width: box[2], height: box[3], rx: 6 }));
      var item = cluster.item;
      group.appendChild(svgElement('text', { x: box[0] + 6, y: box[1] + 12 }, cluster.lines[0] + '  ' + cluster.lines[1]));
      group.appendChild(svgElement('title', {}, cluster.levels.map(function (l) { return levels[l].path; }).join(', ') +
        ' (' + item.type + '): click for its details'));
      drawBadge(group, badgeCounts(cluster.levels), box[0] + box[2] - 2, box[1] + 2);
      clusterLayer.appendChild(group);
      return group;
    });
    edgeGroups = shown.edges.map(function (edge, e) {
      var drawn = layout.routes ? joinedPath(layout.routes[e], layout.segments) : layout.edges[e];
      var group = svgElement('g', { class: 'edge kind-' + edge[EDGE.kind] });
      var c = drawn[0];
      if (c.length >= 2) {
        var d = 'M' + c[0] + ',' + c[1];
        for (var p = 2; p + 5 < c.length; p += 6) {
          d += 'C' + c[p] + ',' + c[p + 1] + ' ' + c[p + 2] + ',' + c[p + 3] + ' ' + c[p + 4] + ',' + c[p + 5];
        }
        var end = drawn[1];
        if (end) {
          var lx = c[c.length - 2], ly = c[c.length - 1];
          var dx = end[0] - lx, dy = end[1] - ly, length = Math.sqrt(dx * dx + dy * dy) || 1;
          var nx = -dy / length * 3, ny = dx / length * 3;
          group.appendChild(svgElement('polygon', {
            points: end[0] + ',' + end[1] + ' ' + (lx + nx) + ',' + (ly + ny) + ' ' + (lx - nx) + ',' + (ly - ny),
          }));
        }
        group.insertBefore(svgElement('path', { d: d }), group.firstChild);
      }
      if (edge[EDGE.shape] && drawn[2]) {
        group.appendChild(svgElement('text', { x: drawn[2][0], y: drawn[2][1] + 3 }, edge[EDGE.shape]));
      }
      edgeLayer.appendChild(group);
      return group;
    });
    var metricName = metricSelect.value;
    var values = [];
    if (metricName) {
      shown.items.forEach(function (item, i) {
        var value = itemMetric(i, metricName);
        if (value !== null && !isNaN(value) && value > 0) values.push(value);
      });
    }
    var low = values.length ? Math.log10(Math.min.apply(null, values)) : 0;
    var high = values.length ? Math.log10(Math.max.apply(null, values)) : 1;
    itemGroups = shown.items.map(function (item, i) {
      var box = layout.nodes[i];
      var x = box[0], y = box[1], w = box[2], h = box[3];
      var classes = 'node kind-' + item.kind + (item.kind === 'box' ? ' box' : '');
      var worst = 'info';
      shown.alike[i].forEach(function (k) {
        (findingsOf.get(k) || []).forEach(function (f) {
          if (SEVERITY_RANK[f.severity] < SEVERITY_RANK[worst]) worst = f.severity;
        });
      });
      if (worst !== 'info') classes += ' severity-' + worst;
      var group = svgElement('g', { class: classes, tabindex: '0', 'data-item': String(i) });
      var rect = svgElement('rect', {
        x: x - w / 2, y: y - h / 2, width: w, height: h, rx: item.kind === 'box' ? 6 : 2,
      });
      if (metricName && OVERLAYS[metricName].scale === 'diff') {
        var state = diffState(itemMetric(i, metricName));
        if (state !== 'unchanged') group.classList.add('diff-' + state);
      } else if (metricName) {
        var value = itemMetric(i, metricName);
        if (value !== null) {
          // One value alone on a level (high === low) takes the middle of the scale, not its palest end.
          var step = isNaN(value) ? -1 : value <= 0 ? 0 : high === low ? Math.floor(SCALE.length / 2) :
            Math.min(SCALE.length - 1, Math.floor((Math.log10(value) - low) / (high - low) * SCALE.length));
          rect.style.fill = step < 0 ? '#d00' : SCALE[step];
          if (step >= 6 || step < 0) group.classList.add('dark');
        }
      }
      group.appendChild(rect);
      var lines = view.labels[i];  // made once, in Python, with the lines Graphviz laid out
      var lineHeight = item.kind === 'box' ? 13 : 12;
      lines.forEach(function (line, n) {
        var text = svgElement('text', {
          x: x, y: y + (n - (lines.length - 1) / 2) * lineHeight + 3.5, class: n === 0 ? 'name' : '',
        }, line);
        if (group.classList.contains('dark')) text.style.fill = '#fff';
        group.appendChild(text);
      });
      group.appendChild(svgElement('title', {}, titleOf(i)));
      if (item.kind === 'box') drawBadge(group, badgeCounts(shown.refs[i]), x + w / 2 - 2, y - h / 2 + 2);
      nodeLayer.appendChild(group);
      return group;
    });
    canvas.appendChild(svg);
    panZoom = svgPanZoom(svg, {
      viewportSelector: '.viewport', fit: true, center: true, minZoom: 0.02, maxZoom: MAX_ZOOM,
      zoomScaleSensitivity: 0.25, dblClickZoomEnabled: false, controlIconsEnabled: false,
    });
    fitView();
    startReadable();
    drawLegend(metricName, values, low, high);
    markMoment();
  }

  function fitView() {
    if (!panZoom) return;
    panZoom.resize();
    panZoom.fit();
    panZoom.zoomBy(0.94);  // a margin: fit() puts the outermost boxes on the window's edges
    panZoom.center();
    // A level of a few nodes would fill the window with huge boxes: keep text at its size.
    var sizes = panZoom.getSizes();
    if (sizes.realZoom > 1.6) {
      panZoom.zoom(panZoom.getZoom() * 1.6 / sizes.realZoom);
      panZoom.center();
    }
  }

  // A hit is shown at a size its text reads at (10-point text at 14 pixels or more,
  // unless the box would then not fit the window), centred.
  var READABLE_ZOOM = 1.4;
  var MAX_ZOOM = 40;  // times the zoom that fits the level to the window
  // A level so long that, fitted to the window, its text would be under two pixels (a
  // part of a long chain: hundreds of ops one below the other) opens at its top, at a
  // size its text reads at; f or Fit shows it whole. A wide level stays fitted.
  var UNREADABLE_ZOOM = 0.15;
  var startedAtTop = false;
  function startReadable() {
    startedAtTop = false;
    var nodesDrawn = view.layout.nodes;
    if (!panZoom || !nodesDrawn.length || panZoom.getSizes().realZoom >= UNREADABLE_ZOOM ||
      2 * view.layout.height < view.layout.width) return;
    var top = 0;
    nodesDrawn.forEach(function (box, i) { if (box[1] - box[3] / 2 < nodesDrawn[top][1] - nodesDrawn[top][3] / 2) top = i; });
    focusItem(top);
    var sizes = panZoom.getSizes();
    var box = nodesDrawn[top];
    panZoom.pan({ x: sizes.width / 2 - box[0] * sizes.realZoom, y: 30 - (box[1] - box[3] / 2) * sizes.realZoom });
    startedAtTop = true;
  }

  function focusItem(i) {
    var box = view.layout.nodes[i];
    var sizes = panZoom.getSizes();
    var fits = Math.min(sizes.width * 0.8 / Math.max(box[2], 1), sizes.height * 0.8 / Math.max(box[3], 1));
    var wanted = Math.min(Math.max(sizes.realZoom, READABLE_ZOOM), fits);
    if (Math.abs(wanted - sizes.realZoom) > 1e-3) {
      var zoom = panZoom.getZoom() * wanted / sizes.realZoom;
      // A huge level fits the window at a tiny zoom, and the most zoom is counted from it.
      if (zoom > MAX_ZOOM) panZoom.setMaxZoom(zoom * 2);
      panZoom.zoom(zoom);
      sizes = panZoom.getSizes();
    }
    panZoom.pan({ x: sizes.width / 2 - box[0] * sizes.realZoom, y: sizes.height / 2 - box[1] * sizes.realZoom });
  }

  function titleOf(i) {
    var item = view.items[i];
    var ref = view.refs[i];
    if (item.kind === 'box') {
      return ref.map(function (l) { return levels[l].path; }).join(', ') + ' (' + item.type + '): click to open';
    }
    if (item.kind === 'in') return 'comes from ' + nodeName(ref);
    if (item.kind === 'out') return 'goes on to ' + nodeName(ref);
    var others = view.alike[i].length - 1;
    return nodeName(ref) + (others ? ' (and its ' + others + (others === 1 ? ' match' : ' matches') + ' in the other blocks of the run)' : '');
  }

  function nodeName(k) {
    var node = nodes[k];
    var name = node.label || (node.kind === 'no_grad' ? 'no grad' : node.kind);
    return node.kind === 'op' || node.kind === 'accumulate_grad' || node.kind === 'no_grad'
      ? name + (levels[node.level].path ? ' in ' + levels[node.level].path : '') : name;
  }

  // A diff's value is one bit per state (views/diffing.py: STATE_BITS); a box or ×N item
  // holding several is changed.
  var DIFF_BITS = { 1: 'unchanged', 2: 'added', 4: 'removed' };
  function diffState(value) {
    if (value === null || value === undefined || isNaN(value)) return 'unchanged';
    return DIFF_BITS[value] || 'changed';
  }

  function drawLegend(metricName, values, low, high) {
    legend.textContent = '';
    if (!metricName) return;
    if (OVERLAYS[metricName].scale === 'diff') {
      legend.appendChild(element('h3', {}, 'Colour: what changed'));
      ['added', 'removed', 'changed'].forEach(function (state) {
        legend.appendChild(element('div', { class: 'diff-key diff-' + state }, state));
      });
      return;
    }
    legend.appendChild(element('h3', {}, 'Colour: ' + OVERLAYS[metricName].title +
      (OVERLAYS[metricName].rollup === 'max' ? ' (largest inside a module)' : ' (summed over a module)')));
    if (!values.length) { legend.appendChild(element('div', {}, 'nothing on this level has a value')); return; }
    var scale = element('div', { class: 'scale' });
    SCALE.forEach(function (colour) { var s = element('span'); s.style.background = colour; scale.appendChild(s); });
    legend.appendChild(scale);
    legend.appendChild(element('div', {}, metricText(metricName, Math.min.apply(null, values)) + ' \u2013 ' +
      metricText(metricName, Math.max.apply(null, values)) + ' (log scale)'));
  }

  // --- moving between levels ------------------------------------------------------------

  function open(level, options) {
    options = options || {};
    if (level !== current) markHitsStale();
    current = level;
    selected = null;
    expanded = !!options.expanded && !cannotExpand(level);
    draw(expanded ? expandedView(level) : boxedView(level));
    drawExpandButton(level);
    drawBreadcrumb(level);
    drawLevelNote(level);
    if (!options.keepDetails) showLevelDetails(level);
    if (options.highlight !== undefined) {
      var group = itemGroups[options.highlight];
      group.classList.add('hit');
      focusItem(options.highlight);
      group.focus({ preventScroll: true });
    }
    if (history.replaceState) {
      try {
        history.replaceState(null, '', '#' + encodeURIComponent(levels[level].path) + (expanded ? EXPANDED_HASH : ''));
      } catch (e) { /* file: pages may refuse */ }
    }
  }

  function toggleExpanded() {
    var why = cannotExpand(current);
    if (why) { levelNote.textContent = why; return; }
    open(current, { expanded: !expanded });
  }

  function drawExpandButton(level) {
    var why = cannotExpand(level);
    expandButton.textContent = expanded ? 'Collapse' : 'Expand all';
    expandButton.setAttribute('aria-pressed', String(expanded));
    expandButton.setAttribute('aria-disabled', String(!!why));
    expandButton.title = why || (expanded ? 'Back to one box per module (key e)'
      : 'Open every module inside this level, down to single ops (key e)');
  }

  function up() {
    if (current !== ROOT) {
      var from = current;
      var parent = levels[current].parent;
      open(parent);
      var place = placeInParent[from];
      if (place) { itemGroups[place.item].focus({ preventScroll: true }); }
    }
  }

  function drawBreadcrumb(level) {
    breadcrumb.textContent = '';
    var chain = ancestors(level).reverse();
    chain.forEach(function (l, n) {
      var parentPath = n ? levels[chain[n - 1]].path : '';
      var name = l === ROOT ? data.title : tail(levels[l].path, parentPath);
      if (n) breadcrumb.appendChild(element('span', { class: 'sep', 'aria-hidden': 'true' }, '\u203a'));
      if (l === level) {
        breadcrumb.appendChild(element('span', { 'aria-current': 'page' }, name));
      } else {
        var button = element('button', { type: 'button' }, name);
        button.addEventListener('click', function () { open(l); });
        breadcrumb.appendChild(button);
      }
    });
  }

  function drawLevelNote(level) {
    levelNote.textContent = '';
    var info = levels[level];
    var place = placeInParent[level];
    var text = level === ROOT
      ? (levels.length > 1 ? 'The whole model: click a module to open it, Backspace or Escape to go back up.'
        : 'The whole graph (recorded without module information, so it is one level).')
      : info.path + ' (' + info.type + '): ' + plural(opsBelow[level], 'op') +
        (info.params ? ', ' + countText(info.params) + ' params' : '');
    if (expanded) text += ' Expanded: every module inside is opened (a folded run shows its first block); e or Collapse goes back to boxes.';
    if (view.layout.note) text += ' ' + view.layout.note;  // drawn without dot: a level too big for it
    if (startedAtTop) text += ' Too long to read whole: shown from its top; f or Fit shows all of it.';
    if (level === data.start && level !== ROOT) {
      text += ' Opened here, since it holds nearly all of the ' + plural(opsBelow[ROOT], 'op') +
        ' of ' + data.title + '; Backspace or the breadcrumb goes up.';
    }
    levelNote.appendChild(document.createTextNode(text));
    if (place && place.run.length > 1) {
      var run = place.run;
      levelNote.appendChild(document.createTextNode(' \u2014 one of ' + run.length + ' alike ' + info.type +
        ' blocks drawn as one, from ' + levels[run[0]].path + ' to ' + levels[run[run.length - 1]].path + '; showing'));
      var choose = element('select', { 'aria-label': 'which of the alike blocks to show' });
      run.forEach(function (l) {
        var option = element('option', { value: String(l) }, levels[l].path);
        if (l === level) option.selected = true;
        choose.appendChild(option);
      });
      choose.addEventListener('change', function () { open(Number(choose.value)); });
      levelNote.appendChild(choose);
    }
  }

  // --- details and tracing -------------------------------------------------------------

  function facts(rows) {
    var list = element('dl', { class: 'facts' });
    rows.forEach(function (row) {
      if (row[1] === undefined || row[1] === null || row[1] === '') return;
      list.appendChild(element('dt', {}, row[0]));
      var value = element('dd');
      if (row[1] instanceof Node) value.appendChild(row[1]); else value.textContent = String(row[1]);
      list.appendChild(value);
    });
    return list;
  }

  function levelLink(l) {
    var button = element('button', { type: 'button', class: 'link' }, l === ROOT ? data.title : levels[l].path);
    button.addEventListener('click', function () { open(l); });
    return button;
  }

  function findingList(list) {
    var wrap = element('div');
    list.forEach(function (f) {
      wrap.appendChild(element('div', { class: 'finding ' + f.severity }, f.severity + ': ' + f.message));
    });
    return wrap;
  }

  function setStep(index) {
    if (!STEPS.length) return;
    stepIndex = Math.max(0, Math.min(STEPS.length - 1, index));
    stepInput.value = String(stepIndex);
    stepText.textContent = String(STEPS[stepIndex]);
    buildMetrics();
    var chosen = selected;
    open(current, { keepDetails: true, expanded: expanded });
    // The details show the chosen step's numbers and mark it on their lines: drawn again,
    // where the reader had scrolled them to; a node chosen stays chosen.
    var scrolled = details.scrollTop;
    if (chosen && chosen.kind === 'node') {
      var item = view.refs.findIndex(function (ref, i) { return view.items[i].kind !== 'box' && ref === chosen.index; });
      if (item >= 0) select(item); else showNodeDetails(chosen.index);
    } else if (detailsOf.level !== undefined) {
      showLevelDetails(detailsOf.level);
    } else if (detailsOf.node !== undefined) {
      showNodeDetails(detailsOf.node);
    }
    details.scrollTop = scrolled;
  }

  // --- statistics over training steps, in the details ------------------------------------

  function numberOf(value) {
    if (value === null || value === undefined) return null;
    return typeof value === 'string' ? Number(value.replace('nan', 'NaN')) : value;
  }

  // Steps across: the first, the chosen and the last step written under an axis.
  function stepAxis(svg, x, bottom, chosen) {
    svg.appendChild(svgElement('line', { x1: x(0), x2: x(STEPS.length - 1), y1: bottom, y2: bottom, class: 'axis' }));
    var marks = [0, STEPS.length - 1];
    if (chosen !== 0 && chosen !== STEPS.length - 1) marks.push(chosen);
    marks.forEach(function (i) {
      var anchor = i === 0 ? 'start' : i === STEPS.length - 1 ? 'end' : 'middle';
      var label = svgElement('text', { x: x(i), y: bottom + 11, 'text-anchor': anchor, class: i === chosen ? 'axis-label now' : 'axis-label' }, String(STEPS[i]));
      svg.appendChild(label);
    });
  }

  // An axis label of three significant digits, in the shorter of its plain and its
  // exponent form (-0.000279 is -2.79e-4; 12300 is 1.23e4).
  function axisNumber(v) {
    var plain = v.toPrecision(3).replace('e+', 'e'), exponent = v.toExponential(2).replace('e+', 'e');
    return exponent.length < plain.length ? exponent : plain;
  }

  // Room left of an axis for labels of these texts (9 px digits are under 6 px wide): the
  // same for every line and histogram (their steps line up) unless a label needs more.
  var AXIS_ROOM = 58;  // '-9.21e-4'
  function labelRoom(texts) {
    var longest = Math.max.apply(null, texts.map(function (t) { return t.length; }));
    return Math.max(AXIS_ROOM, Math.ceil(longest * 6) + 10);
  }

  // A line of one statistic over the steps (steps across), the chosen step marked, its
  // smallest and largest value written beside it.
  function sparkline(values, others) {
    var width = 300, height = 64, bottom = height - 14;
    var points = values.map(numberOf);
    var lines = [points].concat((others || []).map(function (series) { return series.map(numberOf); }));
    var finite = [];
    lines.forEach(function (line) { line.forEach(function (v) { if (v !== null && isFinite(v)) finite.push(v); }); });
    var svg = svgElement('svg', { width: width, height: height, class: 'sparkline', viewBox: '0 0 ' + width + ' ' + height });
    if (!finite.length) { svg.appendChild(svgElement('text', { x: 2, y: 20 }, 'not measured')); return svg; }
    var low = Math.min.apply(null, finite), high = Math.max.apply(null, finite);
    var span = high - low || 1;
    var highText = axisNumber(high), lowText = axisNumber(low);
    var left = labelRoom([highText, lowText]);
    function x(i) { return points.length > 1 ? left + i * (width - left - 4) / (points.length - 1) : (left + width) / 2; }
    function y(v) { return bottom - 3 - (v - low) / span * (bottom - 8); }
    svg.appendChild(svgElement('line', { x1: left - 2, x2: left - 2, y1: 2, y2: bottom, class: 'axis' }));
    svg.appendChild(svgElement('text', { x: left - 5, y: y(high) + 4, 'text-anchor': 'end', class: 'axis-label' }, highText));
    if (high !== low) svg.appendChild(svgElement('text', { x: left - 5, y: y(low) + 2, 'text-anchor': 'end', class: 'axis-label' }, lowText));
    stepAxis(svg, x, bottom, stepIndex);
    lines.slice().reverse().forEach(function (line, n) {  // the first (the rank chosen, or rank 0) drawn last, on top
      var path = '';
      line.forEach(function (v, i) {
        if (v === null || !isFinite(v)) return;
        path += (path ? 'L' : 'M') + x(i).toFixed(1) + ',' + y(v).toFixed(1);
      });
      svg.appendChild(svgElement('path', n === lines.length - 1 ? { d: path } : { d: path, class: 'other-rank' }));
    });
    var now = points[stepIndex];
    if (now !== null && now !== undefined && isFinite(now)) {
      svg.appendChild(svgElement('circle', { cx: x(stepIndex), cy: y(now), r: 3 }));
    }
    svg.appendChild(svgElement('title', {}, 'from ' + low.toPrecision(3) + ' to ' + high.toPrecision(3) +
      (now !== null && now !== undefined ? '; ' + Number(now).toPrecision(3) + ' at step ' + STEPS[stepIndex] : '; not measured at step ' + STEPS[stepIndex])));
    return svg;
  }

  // A histogram over the steps: steps across, a row per bin of log10 of the magnitude
  // up (small at the bottom, each power of ten written on the axis), darker where more
  // elements fall; the chosen step's column outlined. A step without a histogram of its
  // own (watch takes them every tenth step) shows the latest one before it.
  function histogramOverTime(series, edges) {
    var width = 300, left = AXIS_ROOM, bins = edges.length - 1, rowHeight = 6;
    var top = 4, bottom = top + bins * rowHeight, height = bottom + 14;
    var cell = (width - left - 4) / Math.max(series.length, 1);
    function x(i) { return left + i * cell; }
    // Each histogram's span: from its step to the next step that has one.
    var spans = series.map(function () { return 0; });
    var next = series.length;
    for (var j = series.length - 1; j >= 0; j--) {
      if (series[j]) { spans[j] = next - j; next = j; }
    }
    var svg = svgElement('svg', { width: width, height: height, class: 'histograms', viewBox: '0 0 ' + width + ' ' + height });
    series.forEach(function (counts, i) {
      if (!counts) return;
      var most = Math.max.apply(null, counts) || 1;
      counts.forEach(function (count, b) {
        if (!count) return;
        var rect = svgElement('rect', { x: x(i), y: top + (bins - 1 - b) * rowHeight, width: Math.max(cell * spans[i], 1), height: rowHeight });
        rect.style.opacity = String(0.15 + 0.85 * count / most);
        svg.appendChild(rect);
      });
    });
    svg.appendChild(svgElement('line', { x1: left - 2, x2: left - 2, y1: top, y2: bottom, class: 'axis' }));
    edges.forEach(function (edge, b) {
      if (edge !== Math.round(edge) || edge % 2) return;  // every second power of ten
      var at = top + (bins - b) * rowHeight;
      svg.appendChild(svgElement('line', { x1: left - 5, x2: left - 2, y1: at, y2: at, class: 'axis' }));
      svg.appendChild(svgElement('text', { x: left - 7, y: at + 3, 'text-anchor': 'end', class: 'axis-label' }, '1e' + edge));
    });
    function centre(i) { return x(i) + cell / 2; }
    stepAxis(svg, centre, bottom, stepIndex);
    var shown = stepIndex;
    while (shown >= 0 && !series[shown]) shown--;
    if (shown >= 0) {
      svg.appendChild(svgElement('rect', { x: x(shown), y: top, width: Math.max(cell * spans[shown], 1), height: bins * rowHeight, class: 'now' }));
    }
    svg.appendChild(svgElement('title', {}, 'magnitude from 1e' + edges[0] + ' to 1e' + edges[edges.length - 1] + ' (' + data.timeline.histogram_of +
      ') up, steps across; ' + (shown >= 0 ? 'the histogram of step ' + STEPS[shown] + ' outlined' : 'no histogram yet at step ' + STEPS[stepIndex])));
    return svg;
  }

  // With several ranks (watch(ranks='each')): the rank whose numbers the details show, or
  // 'all' (every rank's line, rank 0's on top; histograms summed over the ranks).
  var rankChoice = 'all';

  function rankRecords(record) {
    if (!record.ranks) return [record];
    return rankChoice === 'all' ? record.ranks : [record.ranks[Number(rankChoice)]];
  }

  function summed(list) {
    var present = list.filter(Boolean);
    if (present.length < 2) return present[0];
    return present[0].map(function (counts, i) {
      var columns = present.map(function (series) { return series[i]; }).filter(Boolean);
      if (!columns.length) return null;
      return columns[0].map(function (_, b) { return columns.reduce(function (total, c) { return total + c[b]; }, 0); });
    });
  }

  function rankMenu(record) {
    var label = element('label', { class: 'rank-choice' }, 'rank ');
    var choose = element('select', { id: 'rank' });
    choose.appendChild(element('option', { value: 'all' }, 'all ' + record.ranks.length));
    record.ranks.forEach(function (_, r) { choose.appendChild(element('option', { value: String(r) }, String(r))); });
    choose.value = rankChoice;
    choose.addEventListener('change', function () {
      rankChoice = choose.value;
      if (detailsOf.level !== undefined) showLevelDetails(detailsOf.level); else if (detailsOf.node !== undefined) showNodeDetails(detailsOf.node);
    });
    label.appendChild(choose);
    return label;
  }

  function timeline(key, kinds) {
    var record = data.timeline;
    if (!record) return null;
    var records = rankRecords(record);
    var wrap = element('div', { class: 'timeline' });
    Object.keys(record.statistics).forEach(function (statistic) {
      var lines = records.map(function (r) { return (r.statistics[statistic] || {})[key]; }).filter(Boolean);
      if (!lines.length) return;
      wrap.appendChild(element('div', { class: 'timeline-name' }, statistic.replace(/_/g, ' ')));
      wrap.appendChild(sparkline(lines[0], lines.slice(1)));
    });
    kinds.forEach(function (kind) {
      var series = summed(records.map(function (r) { return (r.histograms[kind] || {})[key]; }));
      if (!series) return;
      wrap.appendChild(element('div', { class: 'timeline-name' }, kind.replace(/_/g, ' ') + ' histogram over the steps'));
      wrap.appendChild(histogramOverTime(series, record.histogram_edges));
    });
    if (!wrap.childNodes.length) return null;
    var box = element('div');
    box.appendChild(element('h3', {}, 'Over ' + plural(STEPS.length || record.steps.length, 'logged step')));
    if (record.ranks) box.appendChild(rankMenu(record));
    box.appendChild(wrap);
    return box;
  }

  // What the details show: {level: l} or {node: k}, drawn again when the step changes.
  var detailsOf = {};

  function showLevelDetails(level) {
    detailsOf = { level: level };
    details.textContent = '';
    var info = levels[level];
    details.appendChild(element('h2', {}, level === ROOT ? data.title : info.type));
    if (level !== ROOT) details.appendChild(element('div', { class: 'details-name' }, info.path));
    var rows = [['ops', opsBelow[level]], ['parameters', info.params ? countText(info.params) : '']];
    Object.keys(metrics).forEach(function (name) {
      rows.push([OVERLAYS[name] ? OVERLAYS[name].title : name, metricText(name, metrics[name].perLevel[level])]);
    });
    rows.push(['findings', badges[level].error + badges[level].warning ?
      badges[level].error + ' errors, ' + badges[level].warning + ' warnings' : '']);
    details.appendChild(facts(rows));
    var over = timeline(level === ROOT ? '' : info.path, ['activation', 'output_grad']);
    if (over) details.appendChild(over);
    if (level === ROOT && looseFindings.length) {
      details.appendChild(element('h3', {}, 'Not in the graph'));
      details.appendChild(findingList(looseFindings));
    }
    if (level !== current) {
      var openButton = element('button', { type: 'button', class: 'link' }, 'open ' + levels[level].path);
      openButton.addEventListener('click', function () { open(level); });
      details.appendChild(openButton);
    }
    details.appendChild(element('p', {}, 'Click a node for its details and to trace what feeds it (green) and where its gradient comes from (purple); drag to pan, wheel to zoom, f to fit, e to expand every module of this level (or collapse it), / to search.'));
  }

  function showNodeDetails(k) {
    detailsOf = { node: k };
    adjacency();
    var node = nodes[k];
    details.textContent = '';
    details.appendChild(element('h2', {}, node.kind === 'op' ? node.label : node.kind.replace('_', ' ')));
    if (node.kind !== 'op') details.appendChild(element('div', { class: 'details-name' }, node.label || '(no name)'));
    var meaning = node.kind === 'op' ? (data.meanings[node.label] || []) : [];
    meaning.forEach(function (line) { details.appendChild(element('p', {}, line)); });
    if (node.kind === 'accumulate_grad') details.appendChild(element('p', {}, 'Stores the gradient of a leaf tensor in its .grad.'));
    if (node.kind === 'no_grad') {
      details.appendChild(element('p', {}, 'No gradient flows back through this input' +
        (node.label ? ': cut by ' + node.label + (node.cut_in || node.module ? ' in ' + (node.cut_in || node.module) : '') + '.' :
          ': a constant, a tensor without requires_grad, or one made under no_grad() or by detach().')));
    }
    var inputs = inputsOf[k].map(function (e) { return data.edges[e][EDGE.shape]; }).filter(Boolean);
    var outputs = outputsOf[k].map(function (e) { return data.edges[e][EDGE.shape]; }).filter(Boolean);
    var rows = [
      ['module', node.level === ROOT && !node.module ? '' : levelLink(node.level)],
      ['shape', node.shape], ['dtype', node.dtype], ['device', node.device],
      ['inputs', inputs.join(', ')], ['output', outputs.length ? outputs[0] : ''],
      ['reason', node.kind === 'no_grad' ? node.note : ''],
      ['note', node.kind === 'saved' ? node.note : ''],
      ['also named', (node.also || []).join(', ')],  // a tied weight's other names
      ['with the constant', (node.constants || []).join(', ')],  // an op's number operands
    ];
    Object.keys(metrics).forEach(function (name) {
      if (!metrics[name].perNode.has(k)) return;
      var notes = OVERLAYS[name] && OVERLAYS[name].notes;  // a diff's: what changed, old -> new
      rows.push([OVERLAYS[name] ? OVERLAYS[name].title : name,
        notes && notes[String(k)] ? notes[String(k)] : metricText(name, metrics[name].perNode.get(k))]);
    });
    (node.attrs || []).forEach(function (pair) { rows.push(['saved ' + pair[0], pair[1]]); });
    details.appendChild(facts(rows));
    var over = node.kind === 'parameter' ? timeline(node.label, ['param', 'grad', 'update']) : null;
    if (over) details.appendChild(over);
    if (findingsOf.has(k)) {
      details.appendChild(element('h3', {}, 'Findings'));
      details.appendChild(findingList(findingsOf.get(k)));
    }
    var traced = trace(k);
    var params = [];
    traced.up.forEach(function (j) { if (nodes[j].kind === 'parameter' || nodes[j].kind === 'leaf') params.push(j); });
    var outs = [];
    traced.down.forEach(function (j) { if (nodes[j].kind === 'output') outs.push(j); });
    details.appendChild(element('h3', {}, plural(params.length, 'parameter') + ' feed this node'));
    details.appendChild(nameList(params));
    details.appendChild(element('h3', {}, 'It reaches ' + plural(outs.length, 'output')));
    details.appendChild(nameList(outs));
  }

  function nameList(indexes) {
    var list = element('ul', { class: 'names' });
    indexes.slice(0, 200).forEach(function (j) {
      var li = element('li');
      var button = element('button', { type: 'button', class: 'link' }, nodes[j].label || nodes[j].kind);
      button.addEventListener('click', function () { reveal({ node: j }); });
      li.appendChild(button);
      list.appendChild(li);
    });
    if (indexes.length > 200) list.appendChild(element('li', {}, '\u2026 and ' + (indexes.length - 200) + ' more'));
    return list;
  }

  function trace(k) {
    adjacency();
    function reach(from, next, end) {
      var seen = new Set([from]);
      var stack = [from];
      while (stack.length) {
        var j = stack.pop();
        next[j].forEach(function (e) {
          var other = data.edges[e][end];
          if (!seen.has(other)) { seen.add(other); stack.push(other); }
        });
      }
      seen.delete(from);
      return seen;
    }
    return { up: reach(k, inputsOf, EDGE.source), down: reach(k, outputsOf, EDGE.target) };
  }

  function clearTrace() {
    if (!svg) return;
    svg.classList.remove('tracing');
    itemGroups.concat(edgeGroups, clusterGroups).forEach(function (g) { g.classList.remove('up', 'down', 'selected', 'hit'); });
  }

  // Mark the items of this level that hold a node of ``set`` with ``cls``.
  function markItems(set, cls) {
    var levelsHit = new Set();
    set.forEach(function (j) { ancestors(nodes[j].level).forEach(function (l) { levelsHit.add(l); }); });
    var marked = new Set();
    function holds(j) { return set.has(j); }
    view.items.forEach(function (item, i) {
      var ref = view.refs[i];
      var hit = item.kind === 'box' ? ref.some(function (l) { return levelsHit.has(l); })
        : view.alike[i].length ? view.alike[i].some(holds) : set.has(ref);
      if (hit) { itemGroups[i].classList.add(cls); marked.add(i); }
    });
    view.clusters.forEach(function (cluster, c) {
      if (cluster.levels.some(function (l) { return levelsHit.has(l); })) clusterGroups[c].classList.add(cls);
    });
    return marked;
  }

  function select(i) {
    clearTrace();
    var item = view.items[i];
    var ref = view.refs[i];
    if (item.kind === 'box') { open(ref[0]); return; }
    var k = ref;
    var traced = trace(k);
    svg.classList.add('tracing');
    itemGroups[i].classList.add('selected');
    var up = markItems(traced.up, 'up');
    var down = markItems(traced.down, 'down');
    up.add(i); down.add(i);
    view.edges.forEach(function (edge, e) {
      var source = edge[EDGE.source], target = edge[EDGE.target];
      if (up.has(source) && up.has(target) && !(down.has(source) && source !== i)) edgeGroups[e].classList.add('up');
      if (down.has(source) && down.has(target) && !(up.has(target) && target !== i)) edgeGroups[e].classList.add('down');
    });
    selected = { kind: 'node', index: k };
    showNodeDetails(k);
  }

  // Open the level that holds a node or module and highlight it there.
  function reveal(target) {
    var level, item;
    if (target.node !== undefined) {
      level = nodes[target.node].level;
      item = levels[level].refs.findIndex(function (ref, i) {
        var kind = templates[levels[level].template].items[i].kind;
        return kind !== 'box' && kind !== 'in' && kind !== 'out' && ref === target.node;
      });
      open(level, { highlight: item, keepDetails: true });
      select(item);
      itemGroups[item].classList.add('hit');
    } else {
      var place = placeInParent[target.level];
      if (!place) { open(target.level); return; }
      level = levels[target.level].parent;
      open(level, { highlight: place.item });
      details.textContent = '';
      showLevelDetails(target.level);
    }
  }

  // --- search ----------------------------------------------------------------------------
  // Nothing typed into the box may stop the page. A search runs once typing pauses
  // (SEARCH_PAUSE_MS; Enter runs it at once), and matches text as it is, ignoring case:
  // `${ finds names holding `${. A query written /like this/ is a regular expression,
  // and runs in a worker thread: one that backtracks for ever, such as (a+)+$ on a
  // long name, is stopped after REGEX_MS and the query is matched as text instead.
  // A query longer than MAX_QUERY characters is not run. Whatever a search ends in,
  // the hits of the one before are gone from the list first.

  var MAX_HITS = 200;
  var MAX_QUERY = 1000;
  var SEARCH_PAUSE_MS = 200;
  var REGEX_MS = 1500;
  var searchTimer = null;
  var searchRun = 0;  // which search is the latest: an answer to an older one is dropped
  var regexWorker = null;
  var regexTimer = null;

  // What a search looks at, one string each: a module's path, its type, a node's name.
  var searchTexts = null;
  var searchTargets = null;
  function searchables() {
    if (searchTexts) return;
    searchTexts = [];
    searchTargets = [];
    levels.forEach(function (level, l) {
      if (l === ROOT) return;
      searchTexts.push(level.path, level.type);
      searchTargets.push({ level: l }, { level: l });
    });
    nodes.forEach(function (node, k) {
      if (node.kind === 'output') { searchTexts.push(node.label || 'output'); searchTargets.push({ node: k }); }
      else if (node.label) { searchTexts.push(node.label); searchTargets.push({ node: k }); }
      (node.also || []).forEach(function (name) { searchTexts.push(name); searchTargets.push({ node: k }); });
    });
  }

  function scheduleSearch(query) {
    clearTimeout(searchTimer);
    searchRun += 1;  // the hits listed are of an older query: gone at once
    stopRegex();
    clearHits(query ? 'Searching\u2026' : '');
    if (query) searchTimer = setTimeout(function () { search(query); }, SEARCH_PAUSE_MS);
  }

  function clearHits(title) {
    hitsList.textContent = '';
    hitsSection.classList.remove('stale');
    hitsSection.removeAttribute('data-query');
    hitsSection.hidden = !title;
    hitsTitle.textContent = title;
  }

  function stopRegex() {
    clearTimeout(regexTimer);
    if (regexWorker && regexWorker.busy) { regexWorker.terminate(); regexWorker = null; }
  }

  // The regular expression a query asks for (/.../), or null for text; an Error if it is not valid.
  function askedPattern(query) {
    if (query.length < 3 || query[0] !== '/' || query[query.length - 1] !== '/') return null;
    try { return new RegExp(query.slice(1, -1), 'i'); } catch (e) { return e; }
  }

  function search(query) {
    clearTimeout(searchTimer);
    stopRegex();
    var run = ++searchRun;
    clearHits(query ? 'Searching\u2026' : '');
    if (!query) return;
    if (query.length > MAX_QUERY) {
      listHits(query, [], 'not searched: ' + query.length.toLocaleString('en') + ' characters, more than the ' +
        MAX_QUERY.toLocaleString('en') + ' a search takes');
      return;
    }
    searchables();
    var pattern = askedPattern(query);
    if (pattern instanceof Error) { listHits(query, textHits(query), 'as text: not a valid regular expression'); return; }
    if (!pattern) { listHits(query, textHits(query), ''); return; }
    var worker = startRegexWorker();
    if (!worker) { listHits(query, textHits(query), 'as text: this browser runs no worker for expressions'); return; }
    worker.busy = true;
    worker.onmessage = function (event) {
      if (event.data.run !== run) return;
      worker.busy = false;
      clearTimeout(regexTimer);
      var hits = [];
      event.data.found.forEach(function (n) { hits.push(searchTargets[n]); });
      listHits(query, uniqueHits(hits), 'regular expression');
    };
    regexTimer = setTimeout(function () {
      if (run !== searchRun) return;
      stopRegex();
      listHits(query, textHits(query), 'as text: the expression ran over ' + REGEX_MS / 1000 + ' s and was stopped');
    }, REGEX_MS);
    worker.postMessage({ run: run, source: pattern.source });
  }

  function startRegexWorker() {
    if (regexWorker) return regexWorker;
    try {
      var code = 'var texts = null; onmessage = function (event) {' +
        ' if (event.data.texts) { texts = event.data.texts; return; }' +
        ' var pattern = new RegExp(event.data.source, "i"), found = [];' +
        ' for (var n = 0; n < texts.length; n++) if (pattern.test(texts[n])) found.push(n);' +
        ' postMessage({ run: event.data.run, found: found }); };';
      var url = URL.createObjectURL(new Blob([code], { type: 'text/javascript' }));
      regexWorker = new Worker(url);
      URL.revokeObjectURL(url);
      regexWorker.postMessage({ texts: searchTexts });
    } catch (e) {
      regexWorker = null;
    }
    return regexWorker;
  }

  function textHits(query) {
    var needle = query.toLowerCase();
    var hits = [];
    searchTexts.forEach(function (text, n) { if (text.toLowerCase().indexOf(needle) >= 0) hits.push(searchTargets[n]); });
    return uniqueHits(hits);
  }

  function uniqueHits(hits) {  // a module found by its path and its type is one hit
    var seen = new Set();
    return hits.filter(function (hit) {
      var key = hit.level !== undefined ? 'l' + hit.level : 'n' + hit.node;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  }

  function listHits(query, hits, how) {
    hitsList.textContent = '';
    hitsSection.hidden = false;
    hitsSection.classList.remove('stale');
    hitsSection.setAttribute('data-query', query);
    hitsTitle.textContent = plural(hits.length, 'hit') + (how ? ' (' + how + ')' : '');
    hits.slice(0, MAX_HITS).forEach(function (hit) {
      var li = element('li');
      var button = element('button', { type: 'button' });
      if (hit.level !== undefined) {
        button.appendChild(document.createTextNode(levels[hit.level].path));
        button.appendChild(element('span', { class: 'where' }, 'module ' + levels[hit.level].type));
      } else {
        var node = nodes[hit.node];
        button.appendChild(document.createTextNode(node.label || node.kind));
        button.appendChild(element('span', { class: 'where' }, node.kind.replace('_', ' ') +
          (levels[node.level].path ? ' in ' + levels[node.level].path : '')));
      }
      button.addEventListener('click', function () {
        revealing = true;
        try { reveal(hit); } finally { revealing = false; }
        Array.prototype.forEach.call(hitsList.querySelectorAll('button[aria-current]'), function (b) {
          b.removeAttribute('aria-current');
        });
        button.setAttribute('aria-current', 'true');
        hitsSection.classList.remove('stale');
      });
      li.appendChild(button);
      hitsList.appendChild(li);
    });
    if (hits.length > MAX_HITS) hitsList.appendChild(element('li', {}, '\u2026 ' + (hits.length - MAX_HITS) + ' more: narrow the search'));
  }

  // A diff's page lists its changes where search hits go, to step through: a module added
  // or removed whole is one entry, a module with several nodes changed another, a node
  // changed alone in its module a third; it opens at the first.
  function listChanges(openFirst) {
    var metric = metrics[diffOverlay.name];
    var hits = [];
    var changedIn = new Map();  // level -> the nodes changed directly in it
    metric.perNode.forEach(function (value, k) {
      var state = diffState(value);
      if (state === 'unchanged') return;
      var whole = null;
      ancestors(nodes[k].level).forEach(function (l) {
        if (l !== ROOT && diffState(metric.perLevel[l]) === state && (state === 'added' || state === 'removed')) whole = l;
      });
      if (whole !== null) { hits.push({ level: whole }); return; }
      if (!changedIn.has(nodes[k].level)) {
        changedIn.set(nodes[k].level, []);
        hits.push({ levelOf: nodes[k].level });
      }
      changedIn.get(nodes[k].level).push(k);
    });
    var listed = [];
    hits.forEach(function (hit) {
      if (hit.levelOf === undefined) { listed.push(hit); return; }
      var inside = changedIn.get(hit.levelOf);
      if (inside.length > 1 && hit.levelOf !== ROOT) listed.push({ level: hit.levelOf });
      else inside.forEach(function (k) { listed.push({ node: k }); });
    });
    hits = uniqueHits(listed);
    if (!hits.length) return;
    listHits('', hits, '');
    hitsSection.removeAttribute('data-query');  // not a search: moving on leaves it as it is
    hitsTitle.textContent = plural(hits.length, 'change') + ' (added, removed, changed)';
    if (openFirst) hitsList.querySelector('button').click();
  }

  // Moving elsewhere than to a hit leaves the hits of the last search listed, marked as
  // an earlier search's: greyed, and said so in the title.
  var revealing = false;
  function markHitsStale() {
    if (revealing || hitsSection.hidden || !hitsSection.hasAttribute('data-query') || hitsSection.classList.contains('stale')) return;
    hitsSection.classList.add('stale');
    hitsTitle.textContent += ' \u2014 earlier search; you have moved on';
  }

  // --- the module table ------------------------------------------------------------------

  var COLUMNS = [
    { key: 'path', title: 'module' }, { key: 'type', title: 'type' }, { key: 'ops', title: 'ops', num: true },
    { key: 'params', title: 'params', num: true },
  ].concat((data.overlays || []).map(function (overlay) {
    return { key: overlay.name, title: overlay.title + (overlay.rollup === 'max' ? ' (max)' : ''), num: true, overlay: true };
  }), [{ key: 'findings', title: 'findings', num: true }]);
  // Sorted at first by the first overlay that has values (the bytes saved for backward,
  // a measured time), else by ops.
  var sortKey = ((data.overlays || []).filter(function (o) { return metrics[o.name] && metrics[o.name].count; })[0] || { name: 'ops' }).name;
  var sortDown = true;
  function tableRows() {
    return levels.map(function (level, l) {
      var row = {
        level: l, path: l === ROOT ? data.title : level.path, type: level.type, ops: opsBelow[l], params: level.params,
        findings: badges[l].error + badges[l].warning,
      };
      Object.keys(OVERLAYS).forEach(function (name) { row[name] = metrics[name] ? metrics[name].perLevel[l] : null; });
      return row;
    });
  }
  function drawTable() {
    var head = part('table-columns');
    var body = part('table-rows');
    head.textContent = '';
    body.textContent = '';
    COLUMNS.forEach(function (column) {
      var th = element('th', { 'aria-sort': column.key === sortKey ? (sortDown ? 'descending' : 'ascending') : 'none' });
      var button = element('button', { type: 'button' }, column.title + (column.key === sortKey ? (sortDown ? ' \u25bc' : ' \u25b2') : ''));
      button.addEventListener('click', function () {
        if (sortKey === column.key) sortDown = !sortDown; else { sortKey = column.key; sortDown = !!column.num; }
        drawTable();
      });
      th.appendChild(button);
      head.appendChild(th);
    });
    var rows = tableRows();
    rows.sort(function (a, b) {
      var x = a[sortKey], y = b[sortKey];
      if (x === null || x === undefined || (typeof x === 'number' && isNaN(x))) return 1;
      if (y === null || y === undefined || (typeof y === 'number' && isNaN(y))) return -1;
      var order = typeof x === 'number' ? x - y : String(x).localeCompare(String(y));
      return (sortDown ? -order : order) || a.level - b.level;
    });
    rows.forEach(function (row) {
      var tr = element('tr');
      COLUMNS.forEach(function (column) {
        var value = row[column.key];
        var text = column.key === 'params' ? (value ? countText(value) : '') :
          column.overlay ? metricText(column.key, value) :
            column.key === 'findings' ? (value || '') : String(value);
        tr.appendChild(element('td', column.num ? { class: 'num' } : {}, text));
      });
      tr.addEventListener('click', function () { showTable(false); open(row.level); });
      body.appendChild(tr);
    });
  }
  function showTable(show) {
    table.hidden = !show;
    part('table-button').setAttribute('aria-expanded', String(show));
    if (show) drawTable();
  }

  // --- events ----------------------------------------------------------------------------

  var pressedAt = null;
  canvas.addEventListener('mousedown', function (event) { pressedAt = [event.clientX, event.clientY]; });
  canvas.addEventListener('click', function (event) {
    var moved = pressedAt && Math.abs(event.clientX - pressedAt[0]) + Math.abs(event.clientY - pressedAt[1]) > 4;
    if (moved) return;  // the end of a drag, not a click
    var group = event.target.closest ? event.target.closest('g.node') : null;
    var cluster = !group && event.target.closest ? event.target.closest('g.cluster') : null;
    if (cluster) {
      clearTrace();
      var inside = view.clusters[Number(cluster.getAttribute('data-cluster'))].levels;
      cluster.classList.add('selected');
      showLevelDetails(inside[0]);
      return;
    }
    if (!group) { clearTrace(); showLevelDetails(current); return; }
    select(Number(group.getAttribute('data-item')));
  });
  canvas.addEventListener('keydown', function (event) {
    var group = event.target.closest ? event.target.closest('g.node') : null;
    if (group && (event.key === 'Enter' || event.key === ' ')) {
      event.preventDefault();
      select(Number(group.getAttribute('data-item')));
    }
  });
  document.addEventListener('keydown', function (event) {
    var typing = event.target.tagName === 'INPUT' || event.target.tagName === 'SELECT';
    if (typing) {
      if (event.key === 'Escape' && event.target === searchBox) { searchBox.value = ''; scheduleSearch(''); searchBox.blur(); }
      if (event.key === 'Enter' && event.target === searchBox) search(searchBox.value);
      return;
    }
    if (event.key === 'Escape' && !table.hidden) { showTable(false); return; }
    if (event.key === 'Backspace' || event.key === 'Escape') { event.preventDefault(); up(); }
    else if (event.key === 'f' && !event.ctrlKey && !event.metaKey) fitView();
    else if (event.key === 'e' && !event.ctrlKey && !event.metaKey) toggleExpanded();
    else if (event.key === '/') { event.preventDefault(); searchBox.focus(); }
    else if (event.key === '[') setStep(stepIndex - 1);
    else if (event.key === ']') setStep(stepIndex + 1);
  });
  searchBox.addEventListener('input', function () { scheduleSearch(searchBox.value); });
  metricSelect.addEventListener('change', function () { open(current, { keepDetails: true, expanded: expanded }); });
  if (stepInput) stepInput.addEventListener('input', function () { setStep(Number(stepInput.value)); });
  expandButton.addEventListener('click', toggleExpanded);
  part('fit').addEventListener('click', fitView);
  part('up').addEventListener('click', up);
  part('table-button').addEventListener('click', function () { showTable(table.hidden); });
  part('table-close').addEventListener('click', function () { showTable(false); });
  window.addEventListener('resize', function () { if (panZoom) { panZoom.resize(); } });

  // --- the memory strip ------------------------------------------------------------------
  // A profiled step's memory (data.memory, StepMemory.page_data() on the Python side): the
  // bytes alive over the step stacked by kind, the phases and the peak. A moment chosen on it
  // (click or drag) marks the items of the drawing whose ops hold tensors saved for backward
  // then: each node saved [saved at, last read at, bytes] spans (seconds from the step's start).

  var memory = data.memory || null;
  var memorySection = part('memory'), memoryStrip = part('memory-strip'), memoryMoment = part('memory-moment');
  var moment = null;  // seconds from the step's start, or null
  var aliveNodes = new Map(), aliveLevels = new Map();  // index -> bytes saved for backward alive at the moment
  var STRIP = { left: 62, right: 12, top: 14, bottom: 18 };

  function kindName(kind) { return kind.replace('_', ' '); }

  function stripScale() {
    var width = memoryStrip.clientWidth || 800, height = memoryStrip.clientHeight || 140;
    var points = memory.points;
    var end = points.length ? points[points.length - 1][0] : 1;
    var top = Math.max(memory.peak, Math.max.apply(null, points.map(function (p) { return p[1]; }))) * 1.08 || 1;
    return {
      width: width, height: height, end: end || 1, top: top,
      x: function (t) { return STRIP.left + t / (end || 1) * (width - STRIP.left - STRIP.right); },
      y: function (b) { return height - STRIP.bottom - b / top * (height - STRIP.top - STRIP.bottom); },
      time: function (px) { return Math.max(0, Math.min(end, (px - STRIP.left) / (width - STRIP.left - STRIP.right) * end)); },
    };
  }

  function niceStep(span, count) {
    var raw = span / count, power = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * power >= raw) return steps[i] * power;
    return 10 * power;
  }
  function byteStep(top, count) {  // a round number of KiB, MiB or GiB, so that the axis reads 256 KiB, 512 KiB ...
    var unit = 1;
    while (top / unit >= 1024 && unit < Math.pow(1024, 4)) unit *= 1024;
    return niceStep(top / unit, count) * unit;
  }

  function drawMemoryStrip() {
    if (!memory) return;
    memoryStrip.textContent = '';
    var s = stripScale(), points = memory.points;
    memoryStrip.setAttribute('viewBox', '0 0 ' + s.width + ' ' + s.height);
    var byteTick = byteStep(s.top, 3);
    for (var b = 0; b <= s.top; b += byteTick) {
      memoryStrip.appendChild(svgElement('line', { class: 'grid', x1: STRIP.left, x2: s.width - STRIP.right, y1: s.y(b), y2: s.y(b) }));
      memoryStrip.appendChild(svgElement('text', { x: STRIP.left - 4, y: s.y(b) + 3, 'text-anchor': 'end' }, bytesText(b)));
    }
    var timeTick = niceStep(s.end, 6);
    for (var t = 0; t <= s.end * 1.0001; t += timeTick) {
      memoryStrip.appendChild(svgElement('line', { class: 'axis', x1: s.x(t), x2: s.x(t), y1: s.height - STRIP.bottom, y2: s.height - STRIP.bottom + 3 }));
      memoryStrip.appendChild(svgElement('text', { x: s.x(t), y: s.height - 4, 'text-anchor': 'middle' }, t === 0 ? '0' : secondsText(t)));
    }
    // Stacked by kind, bottom up in the order the data names them; a timeline without the split is one area.
    var split = points.length && points[0][3] && points[0][3].length === memory.kinds.length;
    var layers = split ? memory.kinds : ['alive'];
    var below = points.map(function () { return 0; });
    // Steps, not slopes: the bytes alive change at an allocation or a free and hold until the
    // next, so each point's value is drawn flat up to the next point's time.
    var last = points.length - 1;
    layers.forEach(function (kind, k) {
      var above = points.map(function (p, i) { return below[i] + (split ? p[3][k] : p[1]); });
      var outline = [];
      points.forEach(function (p, i) {
        outline.push(s.x(p[0]) + ',' + s.y(above[i]));
        if (i < last) outline.push(s.x(points[i + 1][0]) + ',' + s.y(above[i]));
      });
      for (var i = last; i >= 0; i--) {
        if (i < last) outline.push(s.x(points[i + 1][0]) + ',' + s.y(below[i]));
        outline.push(s.x(points[i][0]) + ',' + s.y(below[i]));
      }
      var area = svgElement('polygon', { class: 'kind-' + kind, points: outline.join(' ') });
      area.appendChild(svgElement('title', {}, kindName(kind)));
      memoryStrip.appendChild(area);
      below = above;
    });
    // The phases: where each begins, named at the top.
    var seen = {};
    points.forEach(function (p) {
      if (seen[p[2]]) return;
      seen[p[2]] = true;
      memoryStrip.appendChild(svgElement('line', { class: 'phase', x1: s.x(p[0]), x2: s.x(p[0]), y1: STRIP.top - 4, y2: s.height - STRIP.bottom }));
      memoryStrip.appendChild(svgElement('text', { class: 'phase', x: s.x(p[0]) + 3, y: STRIP.top - 4 }, p[2]));
    });
    memoryStrip.appendChild(svgElement('line', { class: 'axis', x1: STRIP.left, x2: STRIP.left, y1: STRIP.top, y2: s.height - STRIP.bottom }));
    memoryStrip.appendChild(svgElement('line', { class: 'axis', x1: STRIP.left, x2: s.width - STRIP.right, y1: s.height - STRIP.bottom, y2: s.height - STRIP.bottom }));
    var peakY = s.y(memory.peak), peakX = s.x(memory.peak_time);
    memoryStrip.appendChild(svgElement('line', { class: 'peak', x1: STRIP.left, x2: s.width - STRIP.right, y1: peakY, y2: peakY }));
    memoryStrip.appendChild(svgElement('circle', { class: 'peak', cx: peakX, cy: peakY, r: 3.5 }));
    var label = 'peak ' + bytesText(memory.peak) + ' (' + memory.peak_phase + ', ' + secondsText(memory.peak_time) + ')';
    var right = peakX > s.width * 0.7;
    memoryStrip.appendChild(svgElement('text', { class: 'peak', x: peakX + (right ? -6 : 6), y: peakY - 4, 'text-anchor': right ? 'end' : 'start' }, label));
    if (moment !== null) {
      memoryStrip.appendChild(svgElement('line', { class: 'moment', x1: s.x(moment), x2: s.x(moment), y1: STRIP.top - 4, y2: s.height - STRIP.bottom }));
    }
  }

  function pointAt(t) {  // the point of the timeline in force at t: the last at or before it
    var points = memory.points, found = points[0];
    points.forEach(function (p) { if (p[0] <= t) found = p; });
    return found;
  }

  // A moment is chosen to a pixel: tensors alive within half a pixel of it count as alive then.
  function chooseMoment(t, within) {
    within = within || 0;
    moment = t;
    aliveNodes = new Map();
    aliveLevels = new Map();
    memory.saved.forEach(function (entry) {
      var k = entry[0], bytes = 0;
      entry[1].forEach(function (span) { if (span[0] <= t + within && t - within <= span[1]) bytes += span[2]; });
      if (bytes <= 0) return;
      aliveNodes.set(k, bytes);
      ancestors(nodes[k].level).forEach(function (l) { if (l !== ROOT) aliveLevels.set(l, (aliveLevels.get(l) || 0) + bytes); });
    });
    var p = pointAt(t), saved = 0;
    aliveNodes.forEach(function (bytes) { saved += bytes; });
    var text = 'at ' + secondsText(t) + ' (' + p[2] + '): ' + bytesText(p[1]) + ' alive';
    if (p[3] && p[3].length) {
      text += ' (' + memory.kinds.map(function (kind, k) { return kindName(kind) + ' ' + bytesText(p[3][k]); }).join(', ') + ')';
    }
    text += '; saved for backward, ' + bytesText(saved) + ' in ' + plural(aliveLevels.size, 'module') +
      ' and ' + plural(aliveNodes.size, 'op');
    memoryMoment.textContent = text;
    drawMemoryStrip();
    markMoment();
  }

  function markMoment() {
    if (!memory || !view) return;
    itemGroups.forEach(function (group, i) {
      var item = view.items[i];
      var alive = item.kind === 'box' ? view.refs[i].some(function (l) { return aliveLevels.has(l); })
        : view.alike[i].some(function (k) { return aliveNodes.has(k); });
      group.classList.toggle('memory-alive', alive);
    });
    clusterGroups.forEach(function (group, c) {
      group.classList.toggle('memory-alive', view.clusters[c].levels.some(function (l) { return aliveLevels.has(l); }));
    });
  }

  if (memory) {
    memorySection.hidden = false;
    part('memory-title').textContent = 'memory of the step (' + memory.device + ')';
    var key = part('memory-key');
    memory.kinds.forEach(function (kind) {
      key.appendChild(element('span', { class: 'swatch kind-' + kind }));
      key.appendChild(document.createTextNode(kindName(kind)));
    });
    var dragging = false;
    var chooseAt = function (event) {
      var box = memoryStrip.getBoundingClientRect(), s = stripScale();
      var x = (event.clientX - box.left) * (memoryStrip.clientWidth / (box.width || 1));
      var pixel = s.end / Math.max(1, s.width - STRIP.left - STRIP.right);
      // Near the peak's mark, the peak itself: it may last less than a pixel.
      chooseMoment(Math.abs(x - s.x(memory.peak_time)) <= 5 ? memory.peak_time : s.time(x), pixel / 2);
    };
    memoryStrip.addEventListener('pointerdown', function (event) {
      dragging = true;
      if (memoryStrip.setPointerCapture) memoryStrip.setPointerCapture(event.pointerId);
      chooseAt(event);
    });
    memoryStrip.addEventListener('pointermove', function (event) { if (dragging) chooseAt(event); });
    memoryStrip.addEventListener('pointerup', function () { dragging = false; });
    memoryStrip.addEventListener('pointercancel', function () { dragging = false; });
    memoryMoment.textContent = 'click or drag on the strip to choose a moment';
    window.addEventListener('resize', drawMemoryStrip);
  }

  // One path along the segments of a route (join, trunk, branch), in order: where a
  // segment starts off the end of the one before (the edges of a junction end at its
  // rim), a straight piece joins them. The arrow end is the last segment's; the label
  // the last one's that has one.
  function joinedPath(route, segments) {
    var points = [], label = null;
    route.forEach(function (position) {
      var segment = segments[position], c = segment[0];
      if (c.length < 2) return;
      if (points.length) {
        var x = points[points.length - 2], y = points[points.length - 1];
        if (Math.abs(x - c[0]) > 0.05 || Math.abs(y - c[1]) > 0.05) points.push(x, y, c[0], c[1], c[0], c[1]);
        for (var i = 2; i < c.length; i++) points.push(c[i]);
      } else {
        points = c.slice();
      }
      if (segment[2]) label = segment[2];
    });
    var last = segments[route[route.length - 1]];
    return [points, last ? last[1] : null, label];
  }

  // The address names the level shown (#transformer.h.0), and '&expanded' after it the
  // expanded view: a path is written with encodeURIComponent, which escapes '&'.
  // With no level named, the page opens at data.start: past a top level where one module
  // holds nearly every op (Python's start_level says the rule); the breadcrumb goes back up.
  var start = data.start || ROOT;
  var startExpanded = false;
  if (location.hash.length > 1) {
    var hash = location.hash.slice(1);
    startExpanded = hash.slice(-EXPANDED_HASH.length) === EXPANDED_HASH;
    if (startExpanded) hash = hash.slice(0, -EXPANDED_HASH.length);
    var wanted;
    try { wanted = levelByPath.get(decodeURIComponent(hash)); } catch (e) { wanted = undefined; }  // not %-encoded text: the top level
    if (wanted !== undefined) start = wanted;
  }
  open(start, { expanded: startExpanded });
  drawMemoryStrip();
  if (diffOverlay) listChanges(location.hash.length <= 1);
  document.body.setAttribute('data-ready', 'true');
  // For tests and benchmarks: the page's own entry points.
  window.explorer = {
    open: open, up: up, search: search, reveal: reveal, levelByPath: levelByPath, toggleExpanded: toggleExpanded,
    chooseMoment: chooseMoment,
  };
})();
