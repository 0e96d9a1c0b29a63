// @ts-check
// Line diffs of edit tools' display blocks (`{type: "diff", path, old_text, new_text,
// old_start, new_start}`): a longest-common-subsequence walk, shown as a two-gutter table.

import {el} from './util.js';

/** @typedef {['+' | '-' | ' ', string]} Op */

/** @param {string[]} a @param {string[]} b @returns {Op[]} */
function lcsOps(a, b) {
  const n = a.length, m = b.length;
  if (n * m > 4_000_000) return [...a.map(l => /** @type {Op} */ (['-', l])), ...b.map(l => /** @type {Op} */ (['+', l]))];
  const dp = Array.from({length: n + 1}, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      dp[i][j] = a[i] === b[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
  /** @type {Op[]} */
  const ops = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { ops.push([' ', a[i]]); i++; j++; }
    else if (dp[i + 1][j] >= dp[i][j + 1]) ops.push(['-', a[i++]]);
    else ops.push(['+', b[j++]]);
  }
  while (i < n) ops.push(['-', a[i++]]);
  while (j < m) ops.push(['+', b[j++]]);
  return ops;
}

/** A diff display block as a two-gutter table. @param {Record<string, any>} block */
export function diffView(block) {
  const box = el('div', {class: 'diff'});
  box.append(el('div', {class: 'diff-path', text: block.path || ''}));
  if (block.is_summary) {
    box.append(el('div', {class: 'diff-summary', text: `${block.old_text} → ${block.new_text}`}));
    return box;
  }
  const oldLines = (block.old_text ?? '') === '' ? [] : String(block.old_text).split('\n');
  const newLines = (block.new_text ?? '') === '' ? [] : String(block.new_text).split('\n');
  let o = block.old_start || 1, n = block.new_start || 1;
  const table = el('table', {class: 'diff-table'});
  for (const [op, text] of lcsOps(oldLines, newLines)) {
    const cls = op === '+' ? 'add' : op === '-' ? 'del' : 'ctx';
    const left = op === '+' ? '' : o++;
    const right = op === '-' ? '' : n++;
    table.append(el('tr', {class: cls},
      el('td', {class: 'ln', text: left}), el('td', {class: 'ln', text: right}),
      el('td', {class: 'op', text: op}), el('td', {class: 'tx', text})));
  }
  box.append(table);
  return box;
}

/** A unified diff (git diff output) with coloured lines. @param {string} text */
export function unifiedDiff(text) {
  const pre = el('pre', {class: 'unified'});
  for (const line of text.split('\n')) {
    const cls = line.startsWith('+++') || line.startsWith('---') ? 'file'
      : line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : line.startsWith('@@') ? 'hunk'
      : line.startsWith('diff ') ? 'file' : null;
    pre.append(cls ? el('span', {class: `u-${cls}`, text: line}) : line, '\n');
  }
  return pre;
}
