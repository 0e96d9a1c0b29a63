// @ts-check
// Workspace checkpoints on the session page: under each turn, the files it changed (each opens
// its diff), "Rewind to here" (files and/or conversation; files edited by hand are named and
// only overwritten when asked, a copy kept) and "Fork from here" (optionally in a new work
// dir). Over the session's Wire connection: `checkpoints`, `changes`, `rewind`, `fork`,
// offered when the session negotiated `supports_checkpoints`; and the overlay's commit or
// discard that the transcript's card (overlay.js) asks for.

import {el, clear, toast, errorText} from './util.js';
import {RpcError} from './conn.js';
import {unifiedDiff} from './diff.js';

/** @typedef {import('./session.js').SessionView} SessionView */
/** @typedef {{path: string, status: string, kind?: string, binary?: boolean, diff?: string | null, old_mode?: string | null, new_mode?: string | null}} FileChange */

/** A dialog with a title, a body and buttons; removed from the page when closed.
 * @param {string} title @param {HTMLElement} body @param {HTMLElement[]} buttons */
function openDialog(title, body, buttons) {
  const dialog = el('dialog', {class: 'request-dialog wide checkpoint-dialog'},
    el('h2', {text: title}), body, el('div', {class: 'dialog-actions'}, ...buttons,
      el('button', {type: 'button', onclick: () => dialog.close(), text: 'Close'})));
  dialog.addEventListener('close', () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  return dialog;
}

/** The conflicting paths of a refused rewind (`data.reason == "conflicts"`), else null. @param {unknown} err */
export function rewindConflicts(err) {
  if (!(err instanceof RpcError)) return null;
  const data = /** @type {{reason?: string, conflicts?: unknown[]} | undefined} */ (err.data);
  return data?.reason === 'conflicts' ? (data.conflicts || []).map(String) : null;
}

/** "added", "modified", … as one letter and a word for each file's row. @param {FileChange} file */
function statusLabel(file) {
  const mark = {added: 'A', modified: 'M', deleted: 'D', mode: 'X'}[file.status] || '?';
  return `${mark} ${file.path}${file.kind === 'symlink' ? ' (link)' : ''}`;
}

export class TurnCheckpoints {
  /** @param {SessionView} view */
  constructor(view) {
    this.view = view;
    this.enabled = false;
    /** turns whose files row is drawn (or being drawn) @type {Map<number, HTMLElement>} */
    this.rows = new Map();
    /** @type {Set<number>} turns that have a checkpoint */
    this.turns = new Set();
  }

  /** The session's answer to `initialize` says whether it takes checkpoints. @param {any} result */
  negotiated(result) {
    this.enabled = result?.capabilities?.supports_checkpoints === true;
    if (this.enabled) this.refresh();
  }

  /** Forget what was drawn (the transcript was drawn again). */
  reset() { this.rows.clear(); }

  /** A checkpoint was taken: the turn it closed gets (or updates) its row. @param {any} payload */
  taken(payload) {
    if (!this.enabled || !payload) return;
    if (payload.kind === 'end' || payload.kind === 'overlay') this.refresh(payload.turn);
    else if (payload.kind === 'rewind') this.refresh();
  }

  /** Commit or discard the overlay's pending writes (the OverlayApplied event settles the card);
   * background tasks stopped first are named. @param {'commit' | 'discard'} action */
  async resolveOverlay(action) {
    const result = await this.view.conn.request(action === 'commit' ? 'overlay_commit' : 'overlay_discard', {});
    const stopped = result?.stopped_tasks?.length || 0;
    if (stopped) {
      this.view.transcript.note(`${stopped} background task${stopped === 1 ? '' : 's'} stopped first (they ran in the overlay).`, 'note receipt');
      this.view.transcript.flush();
    }
  }

  /** Draw the tools under every numbered turn that has checkpoints (`again`: that turn's anew).
   * @param {number | null} [again] */
  async refresh(again = null) {
    if (!this.enabled) return;
    /** @type {{checkpoints?: {turn: number, kind: string}[]}} */
    let listing;
    try { listing = await this.view.conn.request('checkpoints', {}); } catch { return; }
    // The transcript draws what it received at the next animation frame, which may come long
    // after this answer (a busy machine; a background tab gets none): draw it now, so that the
    // turn whose checkpoint was announced has its section to put the row in.
    this.view.transcript.flush();
    this.turns = new Set((listing.checkpoints || []).filter(c => c.kind !== 'rewind' && c.kind !== 'rewind-before').map(c => c.turn));
    if (again !== null) {
      this.rows.get(again)?.remove();
      this.rows.delete(again);
    }
    for (const section of this.view.log.querySelectorAll('section.turn[data-turn]')) {
      const turn = Number(/** @type {HTMLElement} */ (section).dataset.turn);
      if (!this.turns.has(turn) || this.rows.has(turn)) continue;
      const row = el('div', {class: 'turn-checkpoint', 'data-turn': String(turn)});
      this.rows.set(turn, row);
      section.append(row);
      this.drawRow(row, turn);
    }
  }

  /** @param {HTMLElement} row @param {number} turn */
  async drawRow(row, turn) {
    const files = el('span', {class: 'turn-files', text: 'Files: …'});
    const actions = el('span', {class: 'turn-actions'},
      el('button', {type: 'button', class: 'link rewind-here', onclick: () => this.rewindDialog(turn), text: 'Rewind to here'}),
      el('button', {type: 'button', class: 'link fork-here', onclick: () => this.forkDialog(turn), text: 'Fork from here'}));
    row.append(files, actions);
    try {
      /** @type {{files: FileChange[]}} */
      const changes = await this.view.conn.request('changes', {turn, diffs: false});
      clear(files);
      if (!changes.files.length) { files.textContent = 'No files changed'; return; }
      files.append(`${changes.files.length} file${changes.files.length === 1 ? '' : 's'} changed: `);
      for (const file of changes.files) {
        files.append(el('button', {type: 'button', class: 'link changed-file', title: 'Show the diff',
          onclick: () => this.diffDialog(turn, file.path), text: statusLabel(file)}), ' ');
      }
    } catch (err) {
      files.textContent = `Files: ${errorText(err)}`;
    }
  }

  /** The diff of one file of a turn. @param {number} turn @param {string} path */
  diffDialog(turn, path) {
    return this.showDiff(`Turn ${turn}: ${path}`, path, 'This turn did not change it.',
      () => this.view.conn.request('changes', {turn, diffs: true}));
  }

  /** The diff of one file waiting in the overlay: the work dir's file against the overlay's. @param {string} path */
  overlayDiffDialog(path) {
    return this.showDiff(`Waiting in the overlay: ${path}`, path, 'It is no longer waiting in the overlay.',
      () => this.view.conn.request('overlay_changes', {diffs: true}));
  }

  /** A dialog with one file's change out of what `load` answers (`changes` or `overlay_changes`).
   * @param {string} title @param {string} path @param {string} missing  said when `path` is not in the answer
   * @param {() => Promise<{files: FileChange[]}>} load */
  async showDiff(title, path, missing, load) {
    const body = el('div', {class: 'changes-body', text: 'Loading…'});
    openDialog(title, body, []);
    try {
      const changes = await load();
      const file = changes.files.find(f => f.path === path);
      clear(body);
      if (!file) body.append(el('p', {text: missing}));
      else if (file.diff) body.append(unifiedDiff(file.diff));
      else if (file.status === 'mode') body.append(el('p', {text: `mode ${file.old_mode} → ${file.new_mode}`}));
      else body.append(el('p', {text: file.binary ? `${file.status} (binary)` : file.status}));
    } catch (err) { body.textContent = `Cannot read the changes: ${errorText(err)}`; }
  }

  /** Rewind to the start of `turn`: what to take back, then (refused) the files edited by hand. @param {number} turn */
  rewindDialog(turn) {
    const files = el('input', {type: 'checkbox', id: 'rewind-files', checked: true});
    const context = el('input', {type: 'checkbox', id: 'rewind-context', checked: true});
    const problem = el('div', {class: 'rewind-problem', role: 'alert'});
    const body = el('div', null,
      el('p', {text: `Back to before turn ${turn}: what it and every later turn did is taken back. A rewind can be undone.`}),
      el('label', null, files, ' Files in the work dir'),
      el('label', null, context, ' Conversation'),
      problem);
    const go = el('button', {type: 'button', class: 'primary rewind-go', text: 'Rewind'});
    const force = el('button', {type: 'button', class: 'danger rewind-force', hidden: true, text: 'Rewind anyway (keep a copy)'});
    const dialog = openDialog(`Rewind to turn ${turn}`, body, [go, force]);
    /** @param {boolean} forced */
    const run = async forced => {
      if (!files.checked && !context.checked) { problem.textContent = 'Choose files, conversation or both.'; return; }
      go.disabled = force.disabled = true;
      try {
        const result = await this.view.conn.request('rewind', {turn, files: files.checked, context: context.checked, force: forced});
        dialog.close();
        await this.rewound(result);
      } catch (err) {
        const conflicts = rewindConflicts(err);
        clear(problem);
        if (conflicts) {
          problem.append(el('p', {text: 'These files were changed since the session recorded them; a rewind would overwrite them:'}),
            el('ul', {class: 'conflicts'}, ...conflicts.map(p => el('li', null, el('code', {text: p})))));
          force.hidden = false;
        } else problem.textContent = errorText(err);
        go.disabled = force.disabled = false;
      }
    };
    go.addEventListener('click', () => run(false));
    force.addEventListener('click', () => run(true));
  }

  /** After a rewind: the conversation drawn again (it may have lost turns), a note of what changed. @param {any} result */
  async rewound(result) {
    const restored = result.restored?.length || 0;
    const parts = [`Rewound to turn ${result.to_turn}`, `${restored} file${restored === 1 ? '' : 's'} restored`];
    if (result.forced?.length) parts.push(`${result.forced.length} edited by hand kept in the checkpoint before`);
    if (result.stopped_tasks?.length) parts.push(`${result.stopped_tasks.length} background task(s) stopped`);
    if (result.context) await this.view.reloadAll();
    this.reset();
    await this.refresh();
    this.view.transcript.note(`${parts.join(' · ')}.`, 'note receipt rewind-note');
    this.view.transcript.flush();
  }

  /** Fork with the first `turn` turns, in this work dir or a new one holding the files as then. @param {number} turn */
  forkDialog(turn) {
    const dir = el('input', {type: 'text', id: 'fork-work-dir', placeholder: '/absolute/path/to/new/dir', 'aria-label': 'New work dir'});
    const problem = el('div', {class: 'fork-problem', role: 'alert'});
    const body = el('div', null,
      el('p', {text: `A new session with turns 1–${turn}. Give a new work dir to have the files as they were at the end of turn ${turn} there (a git worktree or a copy); leave it empty to share this work dir.`}),
      el('label', {for: 'fork-work-dir', text: 'New work dir'}), dir, problem);
    const go = el('button', {type: 'button', class: 'primary fork-go', text: 'Fork'});
    const dialog = openDialog(`Fork from turn ${turn}`, body, [go]);
    go.addEventListener('click', async () => {
      go.disabled = true;
      /** @type {Record<string, unknown>} */
      const params = {turn};
      if (dir.value.trim()) params.work_dir = dir.value.trim();
      try {
        const result = await this.view.conn.request('fork', params);
        dialog.close();
        toast(`Forked into ${result.work_dir}`, 'info', 2500);
        this.view.onChange?.();
        location.hash = `#/s/${result.session_id}`;
      } catch (err) {
        problem.textContent = errorText(err);
        go.disabled = false;
      }
    });
  }
}
