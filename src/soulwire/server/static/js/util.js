// @ts-check
// Small DOM helpers. Everything the app shows is built with createElement/textContent:
// no string of model or tool output ever becomes HTML.

/** @typedef {Node | string | number | boolean | null | undefined} Leaf */
/** @typedef {Leaf | Leaf[]} Child  what `el` and `append` take: nodes, text, and nothing (skipped) */
/** @typedef {Record<string, unknown>} Attrs */

/**
 * el('div', {class: 'x', onclick: f, 'aria-label': 'y'}, child, 'text', ...)
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs | null} [attrs]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') node.className = String(value);
      else if (key === 'text') node.textContent = String(value);
      else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), /** @type {EventListener} */ (value));
      else if (key === 'dataset') Object.assign(node.dataset, value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(node, children);
  return node;
}

/** @template {Node & ParentNode} N @param {N} node @param {Child[]} children @returns {N} */
export function append(node, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** What went wrong, in words (an Error's message). @param {unknown} err */
export function errorText(err) {
  return err instanceof Error ? err.message : String(err);
}

/** The page's element with `id` (index.html has it). @param {string} id @returns {HTMLElement} */
export function byId(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error(`the page has no #${id}`);
  return node;
}

/** Members of `window` that the browser tests and bench/web_bench.py read. */
export const probe = /** @type {Record<string, unknown>} */ (/** @type {unknown} */ (globalThis));  // (window, in a page)

/** @template {Node} N @param {N} node @returns {N} */
export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

/** @param {string} text @param {'info' | 'error' | 'warn'} [kind] @param {number} [ms] */
export function toast(text, kind = 'info', ms = 4000) {
  const item = el('div', {class: `toast ${kind}`, text});
  document.getElementById('toasts')?.append(item);
  setTimeout(() => item.remove(), ms);
}

/** @param {number | null | undefined} seconds */
export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return '';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const m = Math.floor(seconds / 60);
  return `${m} min ${Math.round(seconds - m * 60)} s`;
}

/** @param {number | null | undefined} epochSeconds */
export function fmtTime(epochSeconds) {
  if (!epochSeconds) return '';
  const d = new Date(epochSeconds * 1000);
  const today = new Date();
  return d.toDateString() === today.toDateString()
    ? d.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'})
    : d.toLocaleDateString([], {month: 'short', day: 'numeric'});
}

/** @param {number | null | undefined} n */
export function fmtTokens(n) {
  if (!n) return '0';
  return n >= 10000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

/** The text of a user input (a string, or content parts). @param {unknown} input @returns {string} */
export function inputText(input) {
  if (typeof input === 'string') return input;
  if (!Array.isArray(input)) return '';
  return input.filter(p => p && p.type === 'text').map(p => String(p.text)).join(' ');
}

/** @param {string} name @param {string} text @param {string} type */
export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], {type}));
  const a = el('a', {href: url, download: name});
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** What a delegated ACP agent's tool kind means to a person (ui/shell/blocks.py says the same). */
const ACP_KINDS = /** @type {Record<string, string>} */ ({
  read: 'read files', edit: 'edit files', delete: 'delete files', move: 'move files',
  search: 'search', execute: 'run a command', fetch: 'fetch from the network',
});

/**
 * An approval's action as a person reads it: `acp:kimi:edit` (the key rules match) → `edit files (ACP)`.
 * @param {string} action
 * @returns {string}
 */
export function spokenAction(action) {
  if (!action.startsWith('acp:')) return action;
  const kind = action.slice(action.lastIndexOf(':') + 1);
  return `${ACP_KINDS[kind] || 'act'} (ACP)`;
}
