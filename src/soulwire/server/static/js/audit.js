// @ts-check
// The audit trail of a server with named users (admins only): who prompted, approved, changed
// a rule, cancelled, forked, rewound or shared, in which session, and when; filtered by
// session and user, newest last as the server keeps it.

import {el, clear, fmtTime, errorText} from './util.js';
import {web} from './api.js';

/** @typedef {{at: number, user: string, action: string, session_id: string, detail: Record<string, any>}} AuditEntry */

/** @param {AuditEntry} entry */
function detailText(entry) {
  const d = entry.detail || {};
  if (entry.action === 'prompt' || entry.action === 'steer') return d.text || '';
  if (entry.action === 'approval') return `${d.response ?? ''} (${d.request || 'request'})`;
  if (entry.action === 'rule_add' || entry.action === 'rule_remove') return d.rule || '';
  if (entry.action === 'fork') return d.new_session_id ? `→ ${d.new_session_id}` : '';
  if (entry.action === 'share') return d.with ? `with ${d.with}` : '';
  return '';
}

export class AuditView {
  /** @param {HTMLElement} main */
  constructor(main) {
    this.session = /** @type {HTMLInputElement} */ (el('input', {type: 'search', placeholder: 'Session id', 'aria-label': 'Filter by session'}));
    this.user = /** @type {HTMLInputElement} */ (el('input', {type: 'search', placeholder: 'User', 'aria-label': 'Filter by user'}));
    this.body = el('tbody');
    this.status = el('p', {class: 'muted', role: 'status'});
    const form = el('form', {class: 'audit-filters', onsubmit: (/** @type {Event} */ event) => { event.preventDefault(); this.load(); }},
      this.session, this.user, el('button', {type: 'submit', text: 'Filter'}));
    const table = el('table', {class: 'audit-table', id: 'audit-table'},
      el('thead', null, el('tr', null, ...['When', 'User', 'Action', 'Session', 'Detail'].map(h => el('th', {text: h})))), this.body);
    clear(main).append(el('div', {class: 'page'}, el('h1', {text: 'Audit'}), form, this.status, table));
    this.load();
  }

  async load() {
    this.status.textContent = 'Loading…';
    try {
      /** @type {AuditEntry[]} */
      const entries = await web.audit({session_id: this.session.value.trim(), user: this.user.value.trim()});
      clear(this.body);
      for (const entry of entries) {
        const link = el('a', {href: `#/s/${encodeURIComponent(entry.session_id)}`, text: entry.session_id.slice(0, 8)});
        this.body.append(el('tr', {class: `audit-${entry.action}`},
          el('td', {text: fmtTime(entry.at)}), el('td', {text: entry.user}), el('td', {text: entry.action}),
          el('td', null, link), el('td', {text: detailText(entry)})));
      }
      this.status.textContent = entries.length ? `${entries.length} entries` : 'Nothing recorded yet.';
    } catch (err) {
      this.status.textContent = errorText(err);
    }
  }

  destroy() {}
}
