// @ts-check
// A small Markdown renderer that builds DOM nodes directly (never HTML strings), so model output
// cannot inject markup or script: raw HTML in the source stays visible text, and links keep only
// http(s)/mailto/fragment targets. Covers what models write: headings, paragraphs, fenced code
// (highlighted), lists (nested by indentation), block quotes, tables, rules, and inline code,
// emphasis, strike-through, links and autolinks.

import {el} from './util.js';
import {highlight} from './highlight.js';

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

/** The link target when it is safe (http(s), mailto, a fragment), else null. @param {string} url */
export function safeHref(url) {
  const trimmed = url.trim();
  if (/^(https?:|mailto:)/i.test(trimmed)) return trimmed;
  if (trimmed.startsWith('#')) return trimmed;
  return null;
}

/** Render Markdown source into a DocumentFragment. @param {string} source */
export function renderMarkdown(source) {
  const fragment = document.createDocumentFragment();
  renderBlocks(source.split('\n'), fragment);
  return fragment;
}

/** @param {string} line @param {string | undefined} next */
function isBlockStart(line, next) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) ||
    LIST_ITEM.test(line) || (line.includes('|') && next !== undefined && TABLE_SEP.test(next) && next.includes('-'));
}

/** @param {string[]} lines @param {ParentNode} parent */
function renderBlocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    let m;
    if ((m = FENCE.exec(line))) {
      const fence = m[1];
      /** @type {string[]} */
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence)) body.push(lines[i++]);
      i++;
      parent.append(codeBlock(body.join('\n'), m[2]));
      continue;
    }
    if ((m = HEADING.exec(line))) {
      parent.append(el(/** @type {'h3' | 'h4' | 'h5' | 'h6'} */ (`h${Math.min(6, m[1].length + 2)}`), {class: 'md-h'}, inline(m[2])));
      i++;
      continue;
    }
    if (RULE.test(line)) { parent.append(el('hr')); i++; continue; }
    if (QUOTE.test(line)) {
      /** @type {string[]} */
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) { body.push(m[1]); i++; }
      const quote = el('blockquote');
      renderBlocks(body, quote);
      parent.append(quote);
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      const rows = [line];
      i += 2;
      while (i < lines.length && lines[i].includes('|') && lines[i].trim()) rows.push(lines[i++]);
      parent.append(table(rows));
      continue;
    }
    if (LIST_ITEM.test(line)) {
      i = list(lines, i, parent);
      continue;
    }
    const para = [line];
    i++;
    while (i < lines.length && lines[i].trim() && !isBlockStart(lines[i], lines[i + 1])) para.push(lines[i++]);
    parent.append(el('p', null, inline(para.join('\n'))));
  }
}

/** @param {string[]} lines @param {number} start @param {ParentNode} parent */
function list(lines, start, parent) {
  const first = /** @type {RegExpExecArray} */ (LIST_ITEM.exec(lines[start]));  // (the caller matched it)
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = ordered ? el('ol', {start: parseInt(first[2], 10) !== 1 ? parseInt(first[2], 10) : null}) : el('ul');
  let i = start;
  while (i < lines.length) {
    const m = LIST_ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const body = [m[3]];
    i++;
    while (i < lines.length) {
      const line = lines[i];
      if (!line.trim()) {
        const next = lines[i + 1];
        if (next !== undefined && next.length - next.trimStart().length > indent) { body.push(''); i++; continue; }
        break;
      }
      const item = LIST_ITEM.exec(line);
      if (item && item[1].length <= indent) break;
      if (!item && line.length - line.trimStart().length <= indent && isBlockStart(line, lines[i + 1])) break;
      body.push(line.slice(Math.min(indent + 2, line.length - line.trimStart().length)));
      i++;
    }
    const li = el('li');
    if (body.length === 1 || !body.slice(1).some(l => l.trim())) li.append(inline(body[0]));
    else renderBlocks(body, li);
    node.append(li);
  }
  parent.append(node);
  return i;
}

/** @param {string} row */
function splitRow(row) {
  let text = row.trim();
  if (text.startsWith('|')) text = text.slice(1);
  if (text.endsWith('|') && !text.endsWith('\\|')) text = text.slice(0, -1);
  return text.split(/(?<!\\)\|/).map(c => c.trim().replace(/\\\|/g, '|'));
}

/** @param {string[]} rows */
function table(rows) {
  const head = splitRow(rows[0]);
  const wrap = el('div', {class: 'md-table'});
  const t = el('table');
  t.append(el('thead', null, el('tr', null, head.map(c => el('th', null, inline(c))))));
  const body = el('tbody');
  for (const row of rows.slice(1)) body.append(el('tr', null, splitRow(row).map(c => el('td', null, inline(c)))));
  t.append(body);
  wrap.append(t);
  return wrap;
}

/** @param {string} code @param {string} [lang] */
export function codeBlock(code, lang) {
  const copy = el('button', {type: 'button', class: 'copy', text: 'Copy', 'aria-label': 'Copy code'});
  copy.addEventListener('click', () => navigator.clipboard?.writeText(code).then(() => { copy.textContent = 'Copied'; }));
  const codeNode = el('code', {class: lang ? `lang-${lang.replace(/[^\w-]/g, '')}` : null});
  codeNode.append(highlight(code, lang));
  return el('div', {class: 'codeblock'},
    el('div', {class: 'codehead'}, el('span', {text: lang || 'text'}), copy),
    el('pre', null, codeNode));
}

const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([\s\S]+?)\*\*|__([\s\S]+?)__|~~([\s\S]+?)~~|\*([^*\s][\s\S]*?)\*|(?<![\w])_([^_\s][\s\S]*?)_(?![\w])|!?\[([^\]]*)\]\(((?:[^()\s]|\([^()\s]*\))*)(?:\s+"[^"]*")?\)|<(https?:\/\/[^>\s]+)>|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])|( {2,}|\\)\n/g;

/** Inline Markdown → a fragment of text nodes and safe elements. @param {string} text @returns {DocumentFragment} */
export function inline(text) {
  const out = document.createDocumentFragment();
  let last = 0;
  const re = new RegExp(INLINE.source, 'g');  // its own: inline() recurses for nested emphasis
  let m;
  while ((m = re.exec(text))) {
    if (m.index > last) out.append(text.slice(last, m.index));
    last = re.lastIndex;
    if (m[1] !== undefined) out.append(el('code', {text: m[2].replace(/^ (.*) $/, '$1')}));
    else if (m[3] !== undefined || m[4] !== undefined) out.append(el('strong', null, inline(m[3] ?? m[4])));
    else if (m[5] !== undefined) out.append(el('del', null, inline(m[5])));
    else if (m[6] !== undefined || m[7] !== undefined) out.append(el('em', null, inline(m[6] ?? m[7])));
    else if (m[8] !== undefined) {
      const href = safeHref(m[9]);
      const label = m[8] || m[9];
      out.append(href ? el('a', {href, target: '_blank', rel: 'noopener noreferrer nofollow'}, inline(label)) : label);
    } else if (m[10] !== undefined || m[11] !== undefined) {
      const url = m[10] ?? m[11];
      out.append(el('a', {href: url, target: '_blank', rel: 'noopener noreferrer nofollow', text: url}));
    } else if (m[12] !== undefined) out.append(el('br'));
  }
  if (last < text.length) out.append(text.slice(last));
  return out;
}
