// The session page's side panels: the read-only share link, the work dir's git changes (each
// file openable in the local editor), and the approval rules of the session (revocable).

import {el, clear, toast} from './util.js';
import {sessions} from './api.js';
import {unifiedDiff} from './diff.js';

export async function sharePanel(view) {
  try {
    const minted = await sessions.observerToken(view.id);
    const link = `${location.origin}/web/#/observe/${view.id}/${minted.token}`;
    const field = el('input', {value: link, readonly: true, class: 'share-link', 'aria-label': 'Read-only link'});
    const dialog = el('dialog', {class: 'request-dialog'},
      el('h2', {text: 'Read-only link'}),
      el('p', {text: 'Whoever opens this link watches the session live and cannot write. It works until the server stops.'}),
      field,
      el('div', {class: 'dialog-actions'},
        el('button', {type: 'button', class: 'primary', onclick: () => { navigator.clipboard?.writeText(link); toast('Copied', 'info', 1500); }, text: 'Copy'}),
        el('button', {type: 'button', onclick: () => dialog.close(), text: 'Close'})));
    dialog.addEventListener('close', () => dialog.remove());
    document.body.append(dialog);
    dialog.showModal();
    field.select();
  } catch (err) { toast(`Cannot share: ${err.message}`, 'error'); }
}

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
      open.addEventListener('click', () => sessions.open(view.id, path).then(() => toast(`Opened ${path}`, 'info', 1500)).catch(err => toast(err.message, 'error')));
      files.append(el('li', null, el('code', {text: line}), ' ', view.readOnly ? null : open));
    }
    body.append(files, unifiedDiff(diff.diff));
    if (diff.truncated) body.append(el('p', {class: 'muted', text: 'The diff was cut short.'}));
  } catch (err) {
    body.textContent = `Cannot read the diff: ${err.message}`;
  }
}

/** The session's approval rules ("approve for session" grants), listed and revocable. */
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
    let rules;
    try {
      ({rules} = await view.conn.request('approvals/rules/list'));
    } catch (err) { body.append(el('p', {text: `Cannot list the rules: ${err.message}`})); return; }
    if (!rules.length) { body.append(el('p', {class: 'muted', text: 'None yet: "Approve for session" adds one.'})); return; }
    const list = el('ul', {class: 'rules'});
    for (const rule of rules) {
      const text = typeof rule === 'string' ? rule : rule.rule || JSON.stringify(rule);
      const revoke = el('button', {type: 'button', class: 'danger', text: 'Revoke', 'aria-label': `Revoke ${text}`, disabled: view.conn.mode !== 'controller'});
      revoke.addEventListener('click', async () => {
        try { await view.conn.request('approvals/rules/remove', {rule: text}); await render(); }
        catch (err) { toast(`Cannot revoke: ${err.message}`, 'error'); }
      });
      list.append(el('li', null, el('code', {text}), ' ', revoke));
    }
    body.append(list);
  };
  await render();
}
