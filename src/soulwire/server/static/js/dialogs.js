// @ts-check
// Approval and question requests as modal dialogs, one at a time in arrival order, each showing
// what asks, what it would do, and the time left before the server applies its declared
// default. Keys: approval — Y/Enter approve, A approve for the session, N/Esc reject,
// F reject with feedback; question — 1–9 pick an option, Enter submit, Esc dismiss.

import {el, clear, spokenAction} from './util.js';
import {diffView} from './diff.js';

/** @typedef {Record<string, any>} Json */
/**
 * A request waiting for its answer; `actions` are its dialog's buttons (for the keys).
 * @typedef {object} Pending
 * @property {string} id
 * @property {string} type
 * @property {Json} payload
 * @property {number | null} deadline  epoch ms
 * @property {string | undefined} onTimeout
 * @property {Record<string, (n?: number) => void>} [actions]
 */

/** An approval dialog's keys and the actions they take. @type {Record<string, string>} */
const KEYS = {y: 'approve', a: 'session', n: 'reject', f: 'feedback'};

export class RequestDialogs {
  /** @param {{respond: (requestId: string, result: Json) => void}} handlers */
  constructor({respond}) {
    this.respond = respond;
    /** @type {Pending[]} */
    this.queue = [];
    /** @type {Pending | null} */
    this.current = null;
    /** @type {ReturnType<typeof setInterval> | undefined} */
    this.timer = undefined;
    /** @type {Element | null} */
    this.previousFocus = null;
    this.dialog = el('dialog', {class: 'request-dialog', 'aria-modal': 'true'});
    this.dialog.addEventListener('cancel', event => { event.preventDefault(); this.escape(); });
    this.dialog.addEventListener('keydown', event => this.key(event));
    document.body.append(this.dialog);
  }

  /** A `request` message from the server (possibly re-sent after a reconnect). @param {import('./conn.js').RpcMessage} message */
  offer(message) {
    const params = message.params || {};
    const id = String(message.id);
    if (this.current?.id === id || this.queue.some(r => r.id === id)) return;
    if (!['ApprovalRequest', 'QuestionRequest'].includes(params.type)) return;
    const deadline = typeof params.deadline_ms === 'number' ? Date.now() + params.deadline_ms : null;
    this.queue.push({id, type: params.type, payload: params.payload || {}, deadline, onTimeout: params.on_timeout});
    if (!this.current) this.next();
  }

  /** The server says the request was answered (by us, another client, or its deadline). @param {string} id */
  resolved(id) {
    this.queue = this.queue.filter(r => r.id !== id);
    if (this.current?.id === id) this.close();
  }

  clearAll() {
    this.queue = [];
    if (this.current) this.close();
  }

  next() {
    const request = this.queue.shift();
    if (!request) return;
    this.current = request;
    clear(this.dialog);
    if (request.type === 'ApprovalRequest') this.buildApproval(request);
    else this.buildQuestion(request);
    this.previousFocus = document.activeElement;
    if (!this.dialog.open) this.dialog.showModal();
    this.tick();
    clearInterval(this.timer);
    this.timer = setInterval(() => this.tick(), 500);
    this.dialog.querySelector(/** @type {'button'} */ ('[data-autofocus]'))?.focus();
  }

  close() {
    clearInterval(this.timer);
    this.current = null;
    if (this.dialog.open) this.dialog.close();
    if (this.previousFocus instanceof HTMLElement) this.previousFocus.focus();
    this.next();
  }

  /** @param {Json} result */
  answer(result) {
    const request = this.current;
    if (!request) return;
    this.respond(request.id, result);
    this.close();
  }

  tick() {
    const box = this.dialog.querySelector('.deadline');
    const request = this.current;
    if (!box || !request) return;
    if (request.deadline === null) { box.textContent = ''; return; }
    const left = Math.max(0, Math.round((request.deadline - Date.now()) / 1000));
    const m = Math.floor(left / 60), s = left % 60;
    box.textContent = `${m}:${String(s).padStart(2, '0')} left, then ${request.onTimeout === 'approve' ? 'approved' : request.onTimeout === 'cancel' ? 'the turn is cancelled' : 'rejected'}`;
    box.classList.toggle('urgent', left <= 30);
  }

  /** @param {Pending} request */
  buildApproval(request) {
    const p = request.payload;
    const feedback = el('textarea', {class: 'feedback', rows: 2, placeholder: 'Tell the agent what to do instead', 'aria-label': 'Feedback', hidden: true});
    /** @type {Record<string, () => void>} */
    let actions;
    const approve = () => this.answer({request_id: request.id, response: 'approve'});
    const session = () => this.answer({request_id: request.id, response: 'approve_for_session'});
    const reject = () => {
      const text = feedback.hidden ? '' : feedback.value.trim();
      this.answer({request_id: request.id, response: 'reject', ...(text ? {feedback: text} : {})});
    };
    request.actions = actions = {approve, session, reject, feedback: () => { feedback.hidden = false; feedback.focus(); }};
    const who = p.subagent_type ? `${p.sender} (sub-agent ${p.subagent_type})` : p.sender;
    const body = el('div', {class: 'dialog-body'});
    for (const block of p.display || []) {
      if (block.type === 'shell') body.append(el('pre', {class: 'shell-cmd', text: `$ ${block.command}`}));
      else if (block.type === 'diff') body.append(diffView(block));
      else if (block.type === 'brief') body.append(el('div', {text: block.text}));
    }
    this.dialog.setAttribute('aria-labelledby', 'dialog-title');
    this.dialog.append(
      el('h2', {id: 'dialog-title', text: `${who} wants to ${spokenAction(p.action || 'act')}`}),
      el('p', {class: 'dialog-desc', text: p.description || ''}),
      body, feedback,
      el('div', {class: 'deadline', 'aria-live': 'off'}),
      el('div', {class: 'dialog-actions'},
        el('button', {type: 'button', class: 'primary', onclick: approve, 'data-autofocus': true, 'aria-keyshortcuts': 'Y'}, 'Approve ', el('kbd', {text: 'Y'})),
        el('button', {type: 'button', onclick: session, 'aria-keyshortcuts': 'A'}, 'Approve for session ', el('kbd', {text: 'A'})),
        el('button', {type: 'button', class: 'danger', onclick: reject, 'aria-keyshortcuts': 'N'}, 'Reject ', el('kbd', {text: 'N'})),
        el('button', {type: 'button', onclick: actions.feedback, 'aria-keyshortcuts': 'F'}, 'Reject with feedback ', el('kbd', {text: 'F'})),
      ));
  }

  /** @param {Pending} request */
  buildQuestion(request) {
    /** @type {Json[]} */
    const questions = request.payload.questions || [];
    /** @type {Record<string, () => string>} */
    const answers = {};
    const form = el('div', {class: 'dialog-body'});
    /** @type {{group: HTMLElement, inputs: HTMLInputElement[]}[]} */
    const groups = [];
    questions.forEach((q, qi) => {
      const group = el('fieldset', {class: 'question'}, el('legend', {text: q.header ? `${q.header}: ${q.question}` : q.question}));
      if (q.body) group.append(el('p', {class: 'muted', text: q.body}));
      /** @type {HTMLInputElement[]} */
      const inputs = [];
      (q.options || []).forEach((/** @type {Json} */ option, /** @type {number} */ oi) => {
        const input = el('input', {type: q.multi_select ? 'checkbox' : 'radio', name: `q${qi}`, value: option.label, id: `q${qi}o${oi}`});
        inputs.push(input);
        group.append(el('label', {for: `q${qi}o${oi}`, class: 'option'}, input,
          el('span', null, el('kbd', {text: String(oi + 1)}), ' ', option.label),
          option.description ? el('small', {class: 'muted', text: option.description}) : null));
      });
      const other = el('input', {type: 'text', class: 'other', placeholder: q.other_label || 'Other…', 'aria-label': q.other_label || 'Other answer'});
      group.append(other);
      answers[q.question] = () => {
        if (other.value.trim()) return other.value.trim();
        return inputs.filter(i => i.checked).map(i => i.value).join(', ');
      };
      groups.push({group, inputs});
      form.append(group);
    });
    const submit = () => {
      /** @type {Record<string, string>} */
      const result = {};
      for (const [question, read] of Object.entries(answers)) {
        const value = read();
        if (value) result[question] = value;
      }
      this.answer({request_id: request.id, answers: result});
    };
    /** @param {number} [n] */
    const pick = (n = 0) => {  // digits pick in the question that has the focus (the first one otherwise)
      const {inputs} = groups.find(g => g.group.contains(document.activeElement)) || groups[0] || {inputs: []};
      const box = inputs[n];
      if (box) { box.checked = box.type === 'radio' || !box.checked; box.focus(); }
    };
    request.actions = {submit, pick};
    this.dialog.setAttribute('aria-labelledby', 'dialog-title');
    this.dialog.append(
      el('h2', {id: 'dialog-title', text: 'The agent asks'}),
      form,
      el('div', {class: 'deadline'}),
      el('div', {class: 'dialog-actions'},
        el('button', {type: 'button', class: 'primary', onclick: submit, 'data-autofocus': true}, 'Answer ', el('kbd', {text: 'Enter'})),
        el('button', {type: 'button', onclick: () => this.answer({request_id: request.id, answers: {}})}, 'Dismiss ', el('kbd', {text: 'Esc'})),
      ));
  }

  escape() {
    const request = this.current;
    if (!request) return;
    if (request.type === 'ApprovalRequest') request.actions?.reject();
    else this.answer({request_id: request.id, answers: {}});
  }

  /** @param {KeyboardEvent} event */
  key(event) {
    const request = this.current;
    if (!request || event.ctrlKey || event.metaKey || event.altKey) return;
    const actions = request.actions || {};
    const typing = event.target instanceof HTMLTextAreaElement || (event.target instanceof HTMLInputElement && event.target.type === 'text');
    if (request.type === 'ApprovalRequest') {
      if (typing) {
        if (event.key === 'Enter' && !event.shiftKey) { event.preventDefault(); actions.reject?.(); }
        return;
      }
      const action = KEYS[event.key.toLowerCase()];
      if (action) { event.preventDefault(); actions[action]?.(); }
    } else {
      if (!typing && /^[1-9]$/.test(event.key)) { event.preventDefault(); actions.pick?.(Number(event.key) - 1); }
      else if (event.key === 'Enter' && !(event.target instanceof HTMLButtonElement)) { event.preventDefault(); actions.submit?.(); }
    }
  }
}
