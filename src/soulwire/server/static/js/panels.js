// @ts-check
// The session page's side panels: the read-only share link, the work dir's git changes (each
// file openable in the local editor), and the approval rules of the session (revocable).

import {el, clear, toast} from './util.js';
import {sessions, web} from './api.js';
import {unifiedDiff} from './diff.js';

/** @typedef {import('./session.js').SessionView} SessionView */

/** @param {SessionView} view */
export async function sharePanel(view) {
  try {
    const minted = await sessions.observerToken(view.id);
    const link = `${location.origin}/web/#/observe/${view.id}/${minted.token}`;
    const field = el('input', {value: link, readonly: true, class: 'share-link', 'aria-label': 'Read-only link'});
    const dialog = el('dialog', {class: 'request-dialog'},
      el('h2', {text: 'Read-only link'}),
      el('p', {text: 'Whoever opens this link watches the session live and cannot write. It works until the server stops.'}),
      field,
      document.getElementById('whoami') ? shareWithUser(view) : '',
      el('div', {class: 'dialog-actions'},
        el('button', {type: 'button', class: 'primary', onclick: () => { navigator.clipboard?.writeText(link); toast('Copied', 'info', 1500); }, text: 'Copy'}),
        el('button', {type: 'button', onclick: () => dialog.close(), text: 'Close'})));
    dialog.addEventListener('close', () => dialog.remove());
    document.body.append(dialog);
    dialog.showModal();
    field.select();
  } catch (err) { toast(`Cannot share: ${/** @type {Error} */ (err).message}`, 'error'); }
}

/** On a server with named users: let another user in (`POST …/share`, by the owner or an admin). @param {SessionView} view */
function shareWithUser(view) {
  const name = /** @type {HTMLInputElement} */ (el('input', {type: 'text', placeholder: 'User name', 'aria-label': 'Share with user', id: 'share-user'}));
  const submit = async (/** @type {Event} */ event) => {
    event.preventDefault();
    try {
      await web.share(view.id, name.value.trim());
      toast(`Shared with ${name.value.trim()}`, 'info', 2500);
      name.value = '';
    } catch (err) { toast(`Cannot share: ${/** @type {Error} */ (err).message}`, 'error'); }
  };
  return el('form', {class: 'audit-filters', onsubmit: submit},
    name, el('button', {type: 'submit', text: 'Share with user'}));
}

/** @param {SessionView} view */
export async function changesPanel(view) {
  const body = el('div', {class: 'changes-body', text: 'Loading…'});
  const dialog = el('dialog', {class: 'request-dialog wide'},
    el('h2', {text: 'Changes in the work dir'}), body,
    el('div', {class: 'dialog-actions'}, el('button', {type: 'button', onclick: () => dialog.close(), text: 'Close'})));
  dialog.addEventListener('close', () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  try {
    const diff = await sessions.gitDiff(view.id);
    clear(body);
    if (!diff.repo) { body.append(el('p', {text: 'The work dir is not a git repository.'})); return; }
    if (!diff.status.trim()) { body.append(el('p', {text: 'No changes.'})); return; }
    const files = el('ul', {class: 'changed-files'});
    for (const line of diff.status.split('\n').filter(Boolean)) {
      const path = line.slice(3).split(' -> ').pop();
      const open = el('button', {type: 'button', class: 'link', text: 'open', 'aria-label': `Open ${path} in the editor`});
      open.addEventListener('click', () => sessions.open(view.id, path).then(() => toast(`Opened ${path}`, 'info', 1500)).catch((/** @type {Error} */ err) => toast(err.message, 'error')));
      files.append(el('li', null, el('code', {text: line}), ' ', view.readOnly ? null : open));
    }
    body.append(files, unifiedDiff(diff.diff));
    if (diff.truncated) body.append(el('p', {class: 'muted', text: 'The diff was cut short.'}));
  } catch (err) {
    body.textContent = `Cannot read the diff: ${/** @type {Error} */ (err).message}`;
  }
}

/** The session's approval rules ("approve for session" grants), listed and revocable. @param {SessionView} view */
export async function rulesPanel(view) {
  const body = el('div', {class: 'dialog-body'});
  const dialog = el('dialog', {class: 'request-dialog'},
    el('h2', {text: 'Approval rules of this session'}), body,
    el('div', {class: 'dialog-actions'}, el('button', {type: 'button', onclick: () => dialog.close(), text: 'Close'})));
  dialog.addEventListener('close', () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  const render = async () => {
    clear(body);
    /** @type {(string | {rule?: string})[]} */
    let rules;
    try {
      ({rules} = await view.conn.request('approvals/rules/list'));
    } catch (err) { body.append(el('p', {text: `Cannot list the rules: ${/** @type {Error} */ (err).message}`})); return; }
    if (!rules.length) { body.append(el('p', {class: 'muted', text: 'None yet: "Approve for session" adds one.'})); return; }
    const list = el('ul', {class: 'rules'});
    for (const rule of rules) {
      const text = typeof rule === 'string' ? rule : rule.rule || JSON.stringify(rule);
      const revoke = el('button', {type: 'button', class: 'danger', text: 'Revoke', 'aria-label': `Revoke ${text}`, disabled: view.conn.mode !== 'controller'});
      revoke.addEventListener('click', async () => {
        try { await view.conn.request('approvals/rules/remove', {rule: text}); await render(); }
        catch (err) { toast(`Cannot revoke: ${/** @type {Error} */ (err).message}`, 'error'); }
      });
      list.append(el('li', null, el('code', {text}), ' ', revoke));
    }
    body.append(list);
  };
  await render();
}
