// @ts-check
// A turn that ran in the sandbox's overlay (`overlay: "ask"`): its writes wait outside the work
// dir until someone chooses. The card lists the files the turn wrote (added, modified, deleted;
// a click shows a file's diff, as a turn's changed files do: `overlay_changes`)
// and offers Commit / Discard, which call `overlay_commit` / `overlay_discard` over the
// session's Wire; the OverlayApplied event that follows settles the card, the same whether it
// arrives live or from the recorded history drawn again.

import {el, clear, errorText} from './util.js';

/** @typedef {{path: string, status: string}} OverlayFile */
/** @typedef {(action: 'commit' | 'discard', files: OverlayFile[]) => Promise<unknown>} OverlayAct */
/** @typedef {(path: string) => unknown} OverlayDiff  show the diff of one file waiting in the overlay */

const MARK = /** @type {Record<string, string>} */ ({added: 'A', modified: 'M', deleted: 'D'});

/** @param {number} n */
const filesText = n => `${n} file${n === 1 ? '' : 's'}`;

export class OverlayCards {
  constructor() {
    /** the card whose choice is still open @type {{card: HTMLElement, actions: HTMLElement} | null} */
    this.open = null;
  }

  /** An OverlayPending event: a card in `parent` (the turn), with the choice when `act` is given
   * (a tab that only reads the history gets the list alone), and each file's diff on a click
   * when `diff` is given too.
   * @param {HTMLElement} parent @param {{files?: OverlayFile[]}} payload @param {OverlayAct | undefined} act
   * @param {OverlayDiff} [diff] */
  pending(parent, payload, act, diff) {
    const files = payload.files || [];
    this.settle('Still waiting: the next turn wrote to the same overlay (below).');
    const problem = el('div', {class: 'overlay-problem', role: 'alert'});
    const commit = el('button', {type: 'button', class: 'primary overlay-commit', text: 'Commit to the work dir'});
    const discard = el('button', {type: 'button', class: 'danger overlay-discard', text: 'Discard'});
    const actions = el('div', {class: 'overlay-actions'}, commit, discard, problem);
    const card = el('div', {class: 'card overlay-pending', role: 'group', 'aria-label': 'Changes waiting in the overlay'},
      el('div', {class: 'overlay-head', text: `This turn's writes wait in the sandbox's overlay: ${filesText(files.length)}, not yet in the work dir.`}),
      el('ul', {class: 'overlay-files'}, ...files.map(f => {
        const name = el('code', {text: `${MARK[f.status] || '?'} ${f.path}`});
        return el('li', {'data-status': f.status}, act && diff
          ? el('button', {type: 'button', class: 'link overlay-file', title: 'Show the diff', onclick: () => diff(f.path)}, name)
          : name);
      })),
      act ? actions : null);
    /** @param {'commit' | 'discard'} action */
    const choose = async action => {
      if (action === 'discard' && !window.confirm(`Discard the ${filesText(files.length)} this turn wrote? They cannot be brought back.`)) return;
      commit.disabled = discard.disabled = true;
      problem.textContent = '';
      try {
        await act?.(action, files);
      } catch (err) {
        problem.textContent = `Cannot ${action}: ${errorText(err)}`;
        commit.disabled = discard.disabled = false;
      }
    };
    commit.addEventListener('click', () => choose('commit'));
    discard.addEventListener('click', () => choose('discard'));
    parent.append(card);
    this.open = {card, actions};
  }

  /** An OverlayApplied event: the open card says what was done; returns the line to show.
   * @param {{action?: string, files?: OverlayFile[]}} payload */
  applied(payload) {
    const n = filesText((payload.files || []).length);
    const text = payload.action === 'commit' ? `Committed ${n} from the overlay to the work dir.` : `Discarded ${n} of the overlay; the work dir is as it was.`;
    this.settle(text, payload.action === 'commit' ? 'committed' : 'discarded');
    return text;
  }

  /** Close the open card's choice with `text`. @param {string} text @param {string} [state] */
  settle(text, state) {
    const open = this.open;
    if (!open) return;
    this.open = null;
    clear(open.actions).append(el('span', {class: 'overlay-outcome', text}));
    if (state) open.card.dataset.state = state;
  }
}
