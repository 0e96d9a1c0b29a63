// Small DOM helpers. Everything the app shows is built with createElement/textContent:
// no string of model or tool output ever becomes HTML.

/** el('div', {class: 'x', onclick: f, 'aria-label': 'y'}, child, 'text', ...) */
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') node.className = value;
      else if (key === 'text') node.textContent = value;
      else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
      else if (key === 'dataset') Object.assign(node.dataset, value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

export function toast(text, kind = 'info', ms = 4000) {
  const box = document.getElementById('toasts');
  const item = el('div', {class: `toast ${kind}`, text});
  box.append(item);
  setTimeout(() => item.remove(), ms);
}

export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || !isFinite(seconds)) return '';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const m = Math.floor(seconds / 60);
  return `${m} min ${Math.round(seconds - m * 60)} s`;
}

export function fmtTime(epochSeconds) {
  if (!epochSeconds) return '';
  const d = new Date(epochSeconds * 1000);
  const today = new Date();
  return d.toDateString() === today.toDateString()
    ? d.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'})
    : d.toLocaleDateString([], {month: 'short', day: 'numeric'});
}

export function fmtTokens(n) {
  if (!n) return '0';
  return n >= 10000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

/** The text of a user input (a string, or content parts). */
export function inputText(input) {
  if (typeof input === 'string') return input;
  if (!Array.isArray(input)) return '';
  return input.filter(p => p && p.type === 'text').map(p => p.text).join(' ');
}

export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], {type}));
  const a = el('a', {href: url, download: name});
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
