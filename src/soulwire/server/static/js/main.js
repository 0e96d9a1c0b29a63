// @ts-check
// The web app: a hash router over the views (sessions, a live session, the trace, the
// configuration), the session list in the sidebar, the theme, and global keys.

import {el, clear, toast, fmtTime, byId, probe} from './util.js';
import {sessions, web, setObserverToken, observerToken} from './api.js';
import {SessionView} from './session.js';
import {TraceView} from './trace.js';
import {ConfigView} from './config.js';
import {AuditView} from './audit.js';

/** @typedef {{destroy(): void}} View */

const main = byId('main');
/** the view shown @type {View | null} */
let current = null;
/** @type {{default: string, recent: string[]}} */
let workDirs = {default: '', recent: []};

// -- theme ------------------------------------------------------------------------------------
/** @param {string | null} theme */
function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}
applyTheme(localStorage.getItem('soulwire.theme'));
byId('theme-toggle').addEventListener('click', () => {
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === 'dark'
    : matchMedia('(prefers-color-scheme: dark)').matches;
  const next = dark ? 'light' : 'dark';
  localStorage.setItem('soulwire.theme', next);
  applyTheme(next);
});

// -- sidebar ----------------------------------------------------------------------------------
const list = byId('session-list');
const search = /** @type {HTMLInputElement} */ (byId('session-search'));
const filter = /** @type {HTMLSelectElement} */ (byId('work-dir-filter'));
const showArchived = /** @type {HTMLInputElement} */ (byId('show-archived'));
const sidebar = byId('sidebar');
const menu = byId('menu-toggle');
menu.addEventListener('click', () => {
  const open = !sidebar.classList.contains('open');
  sidebar.classList.toggle('open', open);
  menu.setAttribute('aria-expanded', String(open));
});
byId('new-session').addEventListener('click', () => { location.hash = '#/new'; });
/** @type {ReturnType<typeof setTimeout> | undefined} */
let searchTimer;
search.addEventListener('input', () => { clearTimeout(searchTimer); searchTimer = setTimeout(refreshList, 200); });
filter.addEventListener('change', refreshList);
showArchived.addEventListener('change', refreshList);

export async function refreshList() {
  if (observerToken()) return;
  const q = search.value.trim();
  const workDir = filter.value || undefined;
  /** @type {Record<string, any>[]} */
  let items;
  try {
    const archived = showArchived.checked ? undefined : false;  // hidden unless asked for
    items = q ? await sessions.search(q, workDir, archived) : await sessions.list(workDir, archived);
  } catch (err) {
    clear(list).append(el('li', {class: 'muted', text: `Cannot list sessions: ${/** @type {Error} */ (err).message}`}));
    return;
  }
  clear(list);
  if (!items.length) list.append(el('li', {class: 'muted empty', text: q ? 'No session matches.' : 'No sessions yet.'}));
  const active = currentSessionId();
  for (const item of items) {
    const link = el('a', {href: `#/s/${item.id}`, class: 'session-link', 'aria-current': item.id === active ? 'page' : null},
      el('span', {class: 'session-title', text: item.title || 'Untitled session'},
        item.archived ? el('span', {class: 'badge archived-badge', text: 'archived'}) : null),
      el('span', {class: 'session-meta'},
        item.live ? el('span', {class: item.busy ? 'dot busy' : 'dot live', title: item.busy ? 'running' : 'open', 'aria-label': item.busy ? 'running' : 'open'}) : null,
        fmtTime(item.updated), item.snippet ? ` · …${item.snippet}…` : '',
        filter.value ? '' : el('span', {class: 'session-dir', text: ` · ${shortDir(item.work_dir)}`})));
    list.append(el('li', null, link));
  }
}

/** @param {string | undefined} path */
function shortDir(path) {
  const parts = (path || '').split('/').filter(Boolean);
  return parts.slice(-2).join('/');
}

async function loadWorkDirs() {
  try { workDirs = await web.workDirs(); } catch { return; }
  clear(filter).append(el('option', {value: '', text: 'All work dirs'}));
  for (const dir of workDirs.recent) filter.append(el('option', {value: dir, text: shortDir(dir) || dir, title: dir}));
}

function currentSessionId() {
  const m = /^#\/(?:s|trace)\/([^/]+)/.exec(location.hash);
  return m ? decodeURIComponent(m[1]) : null;
}

// -- views ------------------------------------------------------------------------------------
function newSessionView() {
  const params = new URLSearchParams(location.hash.split('?')[1] || '');
  const dirs = [...new Set([params.get('work_dir'), workDirs.default, ...workDirs.recent].filter(d => typeof d === 'string' && d))];
  const dir = el('input', {id: 'new-work-dir', list: 'work-dir-options', value: dirs[0] || '', required: true, spellcheck: 'false'});
  const options = el('datalist', {id: 'work-dir-options'}, dirs.map(d => el('option', {value: d})));
  const title = el('input', {id: 'new-title', placeholder: 'optional: named after the first prompt', maxlength: 200});
  const model = el('select', {id: 'new-model', disabled: true}, el('option', {value: '', text: 'Loading the models…'}));
  const modelHint = el('p', {class: 'muted field-hint', id: 'new-model-hint'});
  const sandbox = el('select', {id: 'new-sandbox'}, ['', 'off', 'read-only', 'workspace-write'].map(v => el('option', {value: v, text: v || 'The server\'s default'})));
  const overlay = el('select', {id: 'new-overlay', disabled: true}, ['', 'ask', 'commit', 'discard'].map(v => el('option', {value: v, text: v ? {ask: 'ask: commit or discard each turn\'s writes', commit: 'commit: each turn\'s writes as it ends', discard: 'discard: dry runs'}[v] : 'off'})));
  sandbox.addEventListener('change', () => { overlay.disabled = sandbox.value !== 'workspace-write'; if (overlay.disabled) overlay.value = ''; });
  const yolo = el('input', {id: 'new-yolo', type: 'checkbox'});
  const plan = el('input', {id: 'new-plan', type: 'checkbox'});
  const form = el('form', {class: 'card form'},
    el('h1', {text: 'New session'}),
    el('label', {for: 'new-work-dir', text: 'Work dir'}), dir, options,
    el('label', {for: 'new-title', text: 'Title'}), title,
    el('label', {for: 'new-model', text: 'Model'}), model, modelHint,
    el('label', {for: 'new-sandbox', text: 'Sandbox'}), sandbox,
    el('label', {for: 'new-overlay', text: 'Overlay (with the workspace-write sandbox)'}), overlay,
    el('label', {class: 'check'}, yolo, ' YOLO: run every tool call without asking'),
    el('label', {class: 'check'}, plan, ' Start in plan mode (read-only planning)'),
    el('div', {class: 'actions'}, el('button', {type: 'submit', class: 'primary', text: 'Create'})));
  // The models are asked for when the form opens, not at page load.
  web.models().then((/** @type {{default: string, models: Record<string, any>[]}} */ {default: chosen, models}) => {
    clear(model);
    if (!models.length) model.append(el('option', {value: '', text: 'The server\'s model (none configured)'}));
    for (const m of models) {
      const label = m.display_name && m.display_name !== m.alias ? `${m.alias} — ${m.display_name}` : (m.model !== m.alias ? `${m.alias} — ${m.model}` : m.alias);
      model.append(el('option', {value: m.alias, text: m.alias === chosen ? `${label} (default)` : label, selected: m.alias === chosen}));
    }
    model.disabled = !models.length;
    const describe = () => {
      const m = models.find(x => x.alias === model.value);
      modelHint.textContent = !m ? '' : [m.max_context_size ? `${Math.round(m.max_context_size / 1000)}k context` : '',
        m.capabilities.length ? m.capabilities.join(', ') : '',
        m.price ? `$${m.price.input}/$${m.price.output} per M tokens in/out` : 'price unknown'].filter(Boolean).join(' · ');
    };
    model.addEventListener('change', describe);
    describe();
  }).catch((/** @type {Error} */ err) => { clear(model).append(el('option', {value: '', text: `Cannot list the models: ${err.message}`})); });
  form.addEventListener('submit', async event => {
    event.preventDefault();
    try {
      /** @type {Record<string, unknown> & {work_dir: string}} */
      const body = {work_dir: dir.value.trim(), title: title.value.trim() || null, yolo: yolo.checked, plan_mode: plan.checked};
      if (model.value) body.model = model.value;
      if (sandbox.value) body.sandbox = sandbox.value;
      if (overlay.value && !overlay.disabled) body.overlay = overlay.value;
      let info;
      try {
        info = await sessions.create(body);
      } catch (error) {
        const err = /** @type {import('./api.js').ApiError} */ (error);
        // A work dir that does not exist yet: offer to make it (as kimi web does).
        if (err.status !== 422 || !/^work_dir must be an existing/.test(err.message) || !body.work_dir.startsWith('/')
            || !window.confirm(`${body.work_dir} does not exist. Create it?`)) throw err;
        info = await sessions.create({...body, create_dir: true});
      }
      location.hash = `#/s/${info.id}`;
      refreshList();
    } catch (err) {
      toast(`Cannot create the session: ${/** @type {Error} */ (err).message}`, 'error');
    }
  });
  clear(main).append(el('div', {class: 'page'}, form));
  dir.focus();
  return {destroy() {}};
}

function homeView() {
  clear(main).append(el('div', {class: 'page'}, el('div', {class: 'card empty-state'},
    el('h1', {text: 'Soulwire'}),
    el('p', {text: 'Pick a session on the left, or start a new one.'}),
    el('p', null, el('a', {href: '#/new', class: 'button primary', text: 'New session'})),
    el('p', {class: 'muted', text: 'Keys: Ctrl+K search · Enter send · Shift+Enter new line · Esc stop the turn'}))));
  return {destroy() {}};
}

function route() {
  const hash = location.hash || '#/';
  current?.destroy();
  current = null;
  sidebar.classList.remove('open');
  menu.setAttribute('aria-expanded', 'false');
  let m;
  if ((m = /^#\/observe\/([^/]+)\/([^/?]+)/.exec(hash))) {
    // A read-only share link: keep the token for this tab only and take it out of the address.
    setObserverToken(decodeURIComponent(m[1]), decodeURIComponent(m[2]));
    history.replaceState(null, '', `#/s/${m[1]}`);
    document.body.classList.add('observer');
    current = new SessionView(main, decodeURIComponent(m[1]), {onChange: refreshList});
  } else if ((m = /^#\/s\/([^/?]+)/.exec(hash))) {
    current = new SessionView(main, decodeURIComponent(m[1]), {onChange: refreshList});
  } else if ((m = /^#\/trace\/([^/?]+)/.exec(hash))) {
    current = new TraceView(main, decodeURIComponent(m[1]));
  } else if (hash.startsWith('#/trace')) {
    current = TraceView.picker(main);
  } else if (hash.startsWith('#/config')) {
    current = new ConfigView(main);
  } else if (hash.startsWith('#/audit')) {
    current = new AuditView(main);
  } else if (hash.startsWith('#/new')) {
    current = newSessionView();
  } else {
    current = homeView();
  }
  for (const [id, prefix] of [['nav-sessions', '#/s'], ['nav-trace', '#/trace'], ['nav-config', '#/config'], ['nav-audit', '#/audit']]) {
    const link = byId(id);
    if (hash.startsWith(prefix)) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  for (const a of list.querySelectorAll('a')) {
    if (a.getAttribute('href') === hash) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

document.addEventListener('keydown', event => {
  if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === 'k') {
    event.preventDefault();
    sidebar.classList.add('open');
    search.focus();
  }
});
window.addEventListener('hashchange', route);
// For tests and the benchmark: the view on screen (its connection, transcript).
probe.__soulwire = {get view() { return current; }};

/** A named user's name in the top bar; the audit view's link for admins. */
async function showUser() {
  try {
    const me = await web.me();
    if (!me.user) return;
    byId('conn-state').before(el('span', {class: 'whoami muted', id: 'whoami', text: `${me.user} · ${me.role}`}));
    byId('nav-audit').hidden = me.role !== 'admin';
  } catch { /* an older server: no users */ }
}

async function start() {
  if (observerToken() && !/^#\/(s|observe)\//.test(location.hash)) sessionStorage.clear();
  if (observerToken() || /^#\/observe\//.test(location.hash)) document.body.classList.add('observer');
  document.getElementById('noscript-hint')?.remove();
  route();
  if (!document.body.classList.contains('observer')) {
    await Promise.all([loadWorkDirs(), refreshList(), showUser()]);
  }
  // Other tabs, people and the CLI change sessions too: refresh the list while the page is seen.
  setInterval(() => {
    if (document.visibilityState === 'visible' && !search.value.trim() && !list.contains(document.activeElement)) refreshList();
  }, 10000);
  probe.__soulwireReady = performance.now();  // ms since the navigation began (bench/web_bench.py)
  document.body.dataset.ready = '1';
}
start();
