// @ts-check
// One session, live: its history (recorded events, with their times) followed by the events of
// the server's ring from the moment the session was opened, then live events over Wire. The
// composer sends a prompt, or steers the running turn; Esc or Stop cancels it. Requests go to
// dialogs when this tab controls the session; otherwise it observes.

import {el, append, clear, toast, fmtTokens, errorText, byId, probe} from './util.js';
import {sessions, web, observerToken, ApiError} from './api.js';
import {RpcError, WireConnection} from './conn.js';
import {Transcript} from './transcript.js';
import {TurnCheckpoints} from './checkpoints.js';
import {usageTotal} from './fold.js';
import {RequestDialogs} from './dialogs.js';
import {sharePanel, changesPanel, rulesPanel} from './panels.js';

const CLIENT = {name: 'soulwire-web', version: '1'};
const TAIL_TURNS = 30;
const TAIL_RECORDS = 1500;

/** After `boundary` (records on disk when the session was opened here), the index just past
 * the last turn the file holds whole, and how many such turns there are. */
/** @typedef {import('./trace.js').SessionRecord} SessionRecord */
/** @typedef {import('./conn.js').RpcMessage} RpcMessage */
/** @typedef {{kind: 'image', url: string, name: string} | {kind: 'file', path: string, name: string}} Attachment */

/** @param {SessionRecord[]} records @param {number} boundary */
function completedTurns(records, boundary) {
  let end = boundary, turns = 0, depth = 0;
  for (let i = boundary; i < records.length; i++) {
    const type = records[i].message.type;
    if (type === 'TurnBegin') depth++;
    else if (type === 'TurnEnd' && depth > 0 && --depth === 0) { turns++; end = i + 1; }
  }
  return {end, turns};
}

/** Where the drawn tail of a history begins: the last TAIL_TURNS turns, fewer if they hold more
 * than TAIL_RECORDS records (the last turn is always drawn whole). */
/** @param {SessionRecord[]} records */
function tailStart(records) {
  if (records.length <= TAIL_RECORDS) return 0;
  /** @type {number[]} */
  const starts = [];
  let depth = 0;
  records.forEach((record, i) => {
    const type = record.message.type;
    if (type === 'TurnBegin' && depth++ === 0) starts.push(i);
    else if (type === 'TurnEnd') depth = Math.max(0, depth - 1);
  });
  if (!starts.length) return 0;
  let k = Math.max(0, starts.length - TAIL_TURNS);
  while (k < starts.length - 1 && records.length - starts[k] > TAIL_RECORDS) k++;
  return starts[k];
}

export class SessionView {
  /** @param {HTMLElement} main @param {string} id @param {{onChange?: () => void}} options */
  constructor(main, id, {onChange}) {
    this.id = id;
    this.onChange = onChange;
    this.busy = false;
    this.loading = true;
    this.replaying = false;
    /** messages that came while the history loads @type {RpcMessage[]} */
    this.buffer = [];
    /** @type {Attachment[]} */
    this.attachments = [];
    this.tokens = 0;
    /** the latest of each StatusUpdate member @type {Record<string, any>} */
    this.status = {};
    /** @type {Record<string, any>} the session's info (`GET /api/sessions/{id}`) */
    this.info = {};
    /** ring events of turns already drawn from the history: skipped @type {{turnEnds: number, depth: number} | null} */
    this.ringSkip = null;
    this.readOnly = !!observerToken();
    /** @type {() => void} */
    this.markReady = () => {};
    /** @type {Promise<void>} */
    this.ready = new Promise(resolve => { this.markReady = resolve; });
    // -- layout
    this.title = el('h1', {class: 'session-title-h', text: 'Session'});
    this.meta = el('div', {class: 'session-sub muted'});
    this.role = el('span', {class: 'role-badge'});
    this.takeButton = el('button', {type: 'button', hidden: true, onclick: () => this.takeControl(), text: 'Take control'});
    this.planButton = el('button', {type: 'button', 'aria-pressed': 'false', onclick: () => this.togglePlan(), text: 'Plan mode'});
    const actions = el('div', {class: 'session-actions', role: 'toolbar', 'aria-label': 'Session actions'},
      this.role, this.takeButton, this.planButton,
      el('button', {type: 'button', class: 'full-only', onclick: () => this.share(), text: 'Share'}),
      el('button', {type: 'button', onclick: () => this.showChanges(), text: 'Changes'}),
      el('button', {type: 'button', onclick: () => this.showRules(), text: 'Rules'}),
      el('a', {class: 'button', href: `#/trace/${this.id}`, text: 'Trace'}),
      el('button', {type: 'button', class: 'full-only', onclick: () => this.rename(), text: 'Rename'}),
      el('button', {type: 'button', class: 'full-only', onclick: () => this.fork(), text: 'Fork'}),
      this.archiveButton = el('button', {type: 'button', class: 'full-only', onclick: () => this.toggleArchive(), text: 'Archive'}),
      el('button', {type: 'button', class: 'full-only danger', onclick: () => this.remove(), text: 'Delete'}));
    this.archivedNote = el('div', {class: 'archived-note', role: 'note', hidden: true,
      text: 'This session is archived: it is hidden from the list. Sending a message brings it back.'});
    this.ownerNote = el('div', {class: 'archived-note owner-note', role: 'note', hidden: true});
    this.log = el('div', {class: 'transcript', role: 'log', 'aria-live': 'polite', 'aria-label': 'Conversation'});
    this.scroller = el('div', {class: 'transcript-scroll'}, this.log);
    this.statusLine = el('div', {class: 'statusline', 'aria-label': 'Status'});
    this.input = el('textarea', {id: 'composer-input', rows: 2, placeholder: 'Ask, or type while it runs to steer it (Enter sends, Shift+Enter new line)', 'aria-label': 'Message'});
    this.input.addEventListener('keydown', event => {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) { event.preventDefault(); this.send(); }
    });
    this.input.addEventListener('paste', event => this.paste(event));
    this.fileInput = el('input', {type: 'file', multiple: true, hidden: true, onchange: () => this.addFiles([...this.fileInput.files || []])});
    this.chips = el('div', {class: 'chips'});
    this.sendButton = el('button', {type: 'submit', class: 'primary', text: 'Send'});
    this.stopButton = el('button', {type: 'button', class: 'danger', hidden: true, onclick: () => this.cancel(), text: 'Stop', 'aria-keyshortcuts': 'Escape'});
    this.composer = el('form', {class: 'composer', 'aria-label': 'Compose'},
      this.chips,
      el('div', {class: 'composer-row'},
        el('button', {type: 'button', class: 'icon-button', 'aria-label': 'Attach files', title: 'Attach files or images', onclick: () => this.fileInput.click(), text: 'Attach'}),
        this.input, this.fileInput, this.stopButton, this.sendButton));
    this.composer.addEventListener('submit', event => { event.preventDefault(); this.send(); });
    this.view = el('div', {class: 'session-view'},
      el('div', {class: 'session-head'}, el('div', {class: 'session-heading'}, this.title, this.meta), actions),
      this.archivedNote, this.ownerNote, this.scroller, this.statusLine, this.composer);
    clear(main).append(this.view);
    this.transcript = new Transcript(this.log, {
      scroller: this.scroller,
      onStatus: status => this.onStatus(status),
      onTurn: phase => { if (!this.replaying) this.setBusy(phase === 'begin'); },
      loadBlob: blobId => web.blob(blobId).catch(err => { toast(`Cannot load: ${errorText(err)}`, 'error'); return null; }),
      onOverlay: action => this.checkpoints.resolveOverlay(action),
      onOverlayDiff: path => this.checkpoints.overlayDiffDialog(path),
    });
    this.dialogs = new RequestDialogs({respond: (rid, result) => this.conn.respond(rid, result)});
    this.conn = new WireConnection(id, {
      onMessage: message => this.onWire(message),
      onState: (state, mode) => this.onConnState(state, mode),
      onGap: () => this.reloadAll(),
      onOwner: owner => {
        this.ownerNote.textContent = `Run by the replica at ${owner}: watched through this one. Take control to drive it there.`;
        this.ownerNote.hidden = false;
      },
    });
    this.checkpoints = new TurnCheckpoints(this);
    /** @param {KeyboardEvent} event */
    this.keyHandler = event => this.globalKey(event);
    document.addEventListener('keydown', this.keyHandler);
    this.load();
  }

  destroy() {
    document.removeEventListener('keydown', this.keyHandler);
    this.conn.close();
    this.dialogs.dialog.remove();
    byId('conn-state').textContent = '';
  }

  // -- loading ---------------------------------------------------------------------------------
  async load() {
    // The session's facts, its recorded history and the attach run at once; the history is
    // then cut where the server's ring begins (`loaded.records`: what was on disk when the
    // session was opened), so nothing is drawn twice.
    const infoFetch = sessions.get(this.id);
    const recordsFetch = sessions.records(this.id);
    const attaching = this.conn.connect();
    recordsFetch.catch(() => {});
    attaching.catch(() => {});
    try {
      this.info = await infoFetch;
    } catch (err) {
      this.conn.close();
      clear(this.log).append(el('div', {class: 'card error', text: err instanceof ApiError && err.status === 404 ? `There is no session ${this.id}.` : `Cannot open the session: ${errorText(err)}`}));
      this.composer.hidden = true;
      return;
    }
    this.showInfo();
    this.setBusy(this.info.busy);
    performance.mark('sw-info');
    /** @type {import('./conn.js').AttachResult & {loaded?: {records?: number}}} */
    let result;
    try {
      result = await attaching;
      performance.mark('sw-attached');
    } catch (err) {
      this.transcript.note(`Cannot attach: ${errorText(err)}`, 'note error');
      this.transcript.flush();
      return;
    }
    /** @type {SessionRecord[]} */
    let records;
    const boundary = result.loaded?.records;
    this.ringSkip = null;
    if (result.complete && typeof boundary === 'number') {
      // The ring holds every event since the session was opened here (seq 1 on); the file has
      // the same events merged, with their times. Turns the file holds whole are drawn from it
      // (real durations); the ring's copies of them are skipped, the rest comes from the ring.
      records = (await recordsFetch).records;
      if (records.length < boundary) records = records.concat((await sessions.records(this.id, records.length, boundary - records.length)).records);
      const {end, turns} = completedTurns(records, boundary);
      records = records.slice(0, end);
      this.ringSkip = {turnEnds: turns, depth: 0};
    } else {
      records = (await sessions.records(this.id)).records;  // read after the attach: nothing between is lost
    }
    performance.mark('sw-records');
    this.renderHistory(records);
    performance.mark('sw-rendered');
    this.loading = false;
    const buffered = this.buffer.splice(0).sort((a, b) => (a.params?.seq ?? 0) - (b.params?.seq ?? 0));
    for (const message of buffered) this.onWire(message, NaN);  // caught up: when they happened is unknown
    this.transcript.flush();
    this.scroller.scrollTop = this.scroller.scrollHeight;
    await this.afterAttach();
    this.markReady();
    this.view.dataset.ready = '1';
    probe.__soulwireSessionReady = performance.now();
    this.input.focus();
  }

  async afterAttach() {
    if (this.conn.mode !== 'controller') return;
    if (!this.busy) {
      const hello = await this.conn.request('initialize', {protocol_version: '1.10', client: CLIENT,
        capabilities: {supports_question: true, supports_plan_mode: true, supports_budget: true, supports_checkpoints: true, supports_model_switch: true}}).catch(() => null);
      this.checkpoints.negotiated(hello);
    }
  }

  /** Draw recorded events. A long history shows its last turns first; the earlier ones are
   * drawn when asked for, so a 10,000-event session opens quickly. */
  /** @param {SessionRecord[]} records */
  renderHistory(records) {
    const start = tailStart(records);
    this.transcript.turnCount = records.slice(0, start).filter(r => r.message.type === 'TurnBegin').length;
    this.replaying = true;
    for (const record of records.slice(start)) this.transcript.queue.push([record.message, record.timestamp]);
    this.transcript.flush();
    this.replaying = false;
    if (start > 0) {
      const turns = records.slice(0, start).filter(r => r.message.type === 'TurnBegin').length;
      const box = el('div', {class: 'earlier'});
      const more = el('button', {type: 'button', class: 'earlier-button', text: `Show ${turns} earlier turn${turns === 1 ? '' : 's'}`});
      more.addEventListener('click', () => {
        const before = this.scroller.scrollHeight - this.scroller.scrollTop;
        more.remove();
        const earlier = new Transcript(box, {loadBlob: this.transcript.options.loadBlob});
        for (const record of records.slice(0, start)) earlier.queue.push([record.message, record.timestamp]);
        earlier.flush();
        this.scroller.scrollTop = this.scroller.scrollHeight - before;
        this.checkpoints.refresh();
      });
      box.append(more);
      this.log.prepend(box);
    }
  }

  /** The connection could not fill a gap: show the whole history again, then go on live. */
  async reloadAll() {
    this.loading = true;
    this.dialogs.clearAll();
    const history = await sessions.records(this.id);
    this.transcript.reset();
    this.checkpoints.reset();
    this.renderHistory(history.records);
    this.loading = false;
    for (const message of this.buffer.splice(0)) this.onWire(message);
    this.conn.request('requests/pending').catch(() => {});
  }

  showInfo() {
    const info = this.info;
    this.title.textContent = info.title || 'Untitled session';
    document.title = `${info.title || 'Session'} · Soulwire`;
    // (through `append`: the DOM's own would write a null out as the text "null")
    append(clear(this.meta), [el('code', {text: info.work_dir}), ` · ${info.turns} turn${info.turns === 1 ? '' : 's'}`,
      info.model ? el('span', {class: 'session-model', text: ` · ${info.model}`}) : null,
      info.yolo ? el('span', {class: 'badge yolo-badge', text: 'YOLO', title: 'tool calls run without asking'}) : null]);
    this.archivedNote.hidden = !info.archived;
    this.archiveButton.textContent = info.archived ? 'Unarchive' : 'Archive';
  }

  // -- Wire -----------------------------------------------------------------------------------
  /** @param {RpcMessage} message @param {number} [ts] when it happened (epoch seconds; NaN: unknown) */
  onWire(message, ts) {
    if (this.loading) { this.buffer.push(message); return; }
    const params = message.params || {};
    const skip = this.ringSkip;
    if (skip && skip.turnEnds > 0 && (message.method === 'event' || message.method === 'request') && !params.resent) {
      if (params.type === 'TurnBegin') skip.depth++;
      else if (params.type === 'TurnEnd' && --skip.depth <= 0) { skip.depth = 0; skip.turnEnds--; }
      return;  // drawn from the recorded history already
    }
    switch (message.method) {
      case 'event':
        this.transcript.push({type: params.type, payload: params.payload, blob: params.blob}, ts);
        if (params.type === 'CheckpointTaken') this.checkpoints.taken(params.payload);
        if (params.type === 'ModelChanged' && this.info) {  // switched by any client (set_model)
          this.info.model = params.payload.model;
          this.showInfo();
        }
        break;
      case 'request':
        this.transcript.push({type: params.type, payload: params.payload}, ts);
        if (this.conn.mode === 'controller') this.dialogs.offer(message);
        break;
      case 'request/resolved':
        this.dialogs.resolved(params.id);
        if (params.user) this.transcript.push({type: 'ResolvedBy', payload: params}, ts);
        break;
      case 'role/changed':
        if (params.controller === null && this.conn.mode !== 'controller' && !this.readOnly) {
          toast('Nobody controls this session now: Take control to write.', 'info', 3000);
        }
        break;
      default:
        break;
    }
  }

  /** @param {import('./conn.js').ConnState} state @param {string} [mode] */
  onConnState(state, mode) {
    const badge = byId('conn-state');
    if (state === 'role') {
      this.role.textContent = mode === 'controller' ? 'controlling' : 'observing';
      this.role.className = `role-badge ${mode}`;
      const observing = mode !== 'controller';
      this.takeButton.hidden = !observing || this.readOnly;
      this.input.disabled = observing;
      this.sendButton.disabled = observing;
      this.planButton.disabled = observing;
      this.input.placeholder = observing ? 'Observing: another tab or person controls this session' : 'Ask, or type while it runs to steer it (Enter sends, Shift+Enter new line)';
      if (!observing) this.ownerNote.hidden = true;  // (driven from here now)
      if (observing) this.dialogs.clearAll();
      else this.conn.request('requests/pending').catch(() => {});
      return;
    }
    badge.textContent = state === 'live' ? '' : state === 'connecting' ? 'connecting…' : 'reconnecting…';
    badge.className = `conn-state ${state}`;
  }

  /** @param {Record<string, any>} status a StatusUpdate's payload */
  onStatus(status) {
    for (const [key, value] of Object.entries(status)) if (value !== null && value !== undefined) this.status[key] = value;
    this.tokens += usageTotal(status.token_usage);
    const s = this.status;
    const parts = [];
    if (typeof s.context_usage === 'number') parts.push(`context ${(s.context_usage * 100).toFixed(1)}%${s.max_context_tokens ? ` of ${fmtTokens(s.max_context_tokens)}` : ''}`);
    if (this.tokens) parts.push(`${fmtTokens(this.tokens)} tokens`);
    if (s.plan_mode) parts.push('PLAN');
    const budget = closestLimit(s.budget);
    if (budget) parts.push(budget);
    this.statusLine.textContent = parts.join(' · ');
    this.planButton.setAttribute('aria-pressed', String(!!s.plan_mode));
  }

  /** @param {boolean} busy */
  setBusy(busy) {
    const was = this.busy;
    this.busy = busy;
    this.stopButton.hidden = !busy;
    this.sendButton.textContent = busy ? 'Steer' : 'Send';
    this.view.classList.toggle('busy', busy);
    if (was && !busy && !this.loading) {
      this.dialogs.clearAll();
      this.onChange?.();
      sessions.get(this.id).then(info => { this.info = info; this.showInfo(); }).catch(() => {});  // title, turns
    }
  }

  // -- actions --------------------------------------------------------------------------------
  async send() {
    const text = this.input.value;
    if (!text.trim() && !this.attachments.length) return;
    await this.ready;
    if (this.conn.mode !== 'controller') { toast('This tab observes; take control to write.', 'warn'); return; }
    const files = this.attachments.filter(a => a.kind === 'file');
    const images = this.attachments.filter(a => a.kind === 'image');
    let full = text;
    if (files.length) full += `\n\nAttached files:\n${files.map(f => `- ${f.path}`).join('\n')}`;
    const userInput = images.length
      ? [{type: 'text', text: full}, ...images.map(i => ({type: 'image_url', image_url: {url: i.url}}))]
      : full;
    this.input.value = '';
    this.attachments = [];
    clear(this.chips);
    if (this.busy) {
      try {
        await this.conn.request('steer', {user_input: userInput});
        toast('Sent to the running turn', 'info', 2000);
      } catch (err) {
        toast(`Cannot steer: ${errorText(err)}`, 'error');
        this.input.value = text;
      }
      return;
    }
    this.setBusy(true);
    try {
      const result = await this.conn.request('prompt', {user_input: userInput});
      if (result?.status === 'max_steps_reached') this.transcript.note(`Stopped after the maximum of ${result.steps} steps.`, 'note warn');
    } catch (err) {
      if (errorText(err) !== 'connection closed') {
        this.transcript.note(`The turn failed: ${errorText(err)}`, 'note error');
        this.transcript.flush();
        if (!(err instanceof RpcError && err.code === -32000 && /in progress|running/i.test(err.message))) this.setBusy(false);
      }
    }
  }

  async cancel() {
    if (!this.busy || this.conn.mode !== 'controller') return;
    try {
      const receipt = await this.conn.request('cancel');
      this.showReceipt(receipt);
    } catch (err) {
      toast(`Cannot stop: ${errorText(err)}`, 'error');
    }
  }

  /** @param {Record<string, unknown>} receipt `cancel`'s result */
  showReceipt(receipt) {
    const parts = [];
    for (const [key, value] of Object.entries(receipt || {})) {
      if (Array.isArray(value)) parts.push(`${key.replace(/_/g, ' ')}: ${value.length ? value.map(v => typeof v === 'object' ? (v.name || v.id || v.tool_call_id || JSON.stringify(v)) : v).join(', ') : 'none'}`);
      else if (value !== null && typeof value !== 'object') parts.push(`${key.replace(/_/g, ' ')}: ${value}`);
    }
    this.transcript.note(parts.length ? `Stopped. ${parts.join(' · ')}` : 'Stopped.', 'note receipt');
    this.transcript.flush();
  }

  /** @param {KeyboardEvent} event */
  globalKey(event) {
    if (event.key === 'Escape' && this.busy && !this.dialogs.current && !document.querySelector('dialog[open]')) {
      event.preventDefault();
      this.cancel();
    }
  }

  async takeControl() {
    try {
      await this.conn.takeControl();
      await this.afterAttach();
    } catch (err) {
      toast(`Cannot take control: ${errorText(err)}`, 'error');
    }
  }

  /** @param {boolean} enabled */
  async setPlan(enabled) {
    try {
      await this.conn.request('set_plan_mode', {enabled});
    } catch (err) {
      toast(`Cannot change plan mode: ${errorText(err)}`, 'error');
    }
  }

  togglePlan() {
    this.setPlan(!this.status.plan_mode);
  }

  async rename() {
    const title = /** @type {string | null} */ (window.prompt('New title', this.info?.title || ''));
    if (!title || !title.trim()) return;
    try {
      this.info = await sessions.rename(this.id, title.trim());
      this.showInfo();
      this.onChange?.();
    } catch (err) { toast(`Cannot rename: ${errorText(err)}`, 'error'); }
  }

  async toggleArchive() {
    try {
      this.info = await sessions.archive(this.id, !this.info?.archived);
      this.showInfo();
      this.onChange?.();
      toast(this.info.archived ? 'Archived: hidden from the list (Show archived lists it)' : 'Unarchived', 'info', 2500);
    } catch (err) { toast(`Cannot archive: ${errorText(err)}`, 'error'); }
  }

  async fork() {
    try {
      const info = await sessions.fork(this.id);
      this.onChange?.();
      location.hash = `#/s/${info.id}`;
    } catch (err) { toast(`Cannot fork: ${errorText(err)}`, 'error'); }
  }

  async remove() {
    if (!window.confirm('Delete this session and its history? This cannot be undone.')) return;
    this.conn.close();
    await new Promise(resolve => { setTimeout(resolve, 150); });  // let the server see this socket go
    try {
      await sessions.remove(this.id);
      this.onChange?.();
      location.hash = '#/';
    } catch (err) {
      toast(`Cannot delete: ${errorText(err)}`, 'error');
      location.reload();
    }
  }

  share() { return sharePanel(this); }

  showChanges() { return changesPanel(this); }

  showRules() { return rulesPanel(this); }

  // -- attachments ----------------------------------------------------------------------------
  /** @param {ClipboardEvent} event */
  paste(event) {
    const files = [...(event.clipboardData?.files || [])];
    if (files.length) { event.preventDefault(); this.addFiles(files); }
  }

  /** @param {File[]} files */
  async addFiles(files) {
    for (const file of files) {
      try {
        if (file.type.startsWith('image/') && file.size < 5 << 20) {
          /** @type {string} */
          const url = await new Promise((resolve, reject) => {
            const reader = new FileReader();
            reader.onload = () => resolve(String(reader.result));
            reader.onerror = () => reject(reader.error);
            reader.readAsDataURL(file);
          });
          this.attachments.push({kind: 'image', url, name: file.name});
        } else {
          const saved = await sessions.upload(this.id, file);
          this.attachments.push({kind: 'file', path: saved.path, name: saved.name});
        }
      } catch (err) {
        toast(`Cannot attach ${file.name}: ${errorText(err)}`, 'error');
      }
    }
    this.fileInput.value = '';
    clear(this.chips);
    this.attachments.forEach((a, i) => {
      const remove = el('button', {type: 'button', class: 'chip-x', 'aria-label': `Remove ${a.name}`, text: '×'});
      remove.addEventListener('click', () => { this.attachments.splice(i, 1); this.addFiles([]); });
      this.chips.append(el('span', {class: 'chip'}, a.kind === 'image' ? el('img', {src: a.url, alt: ''}) : null, a.name, remove));
    });
  }
}

/**
 * The limit of a BudgetUpdate nearest to being reached, as "tree usd $0.12 of $5.00" (or '').
 * @param {any} report a BudgetUpdate payload
 * @returns {string}
 */
function closestLimit(report) {
  if (!report || !report.budget) return '';
  /** @param {string} kind @param {number} v */
  const show = (kind, v) => kind === 'usd' ? `$${Number(v).toFixed(2)}` : kind === 'time_s' ? `${Math.round(v)}s` : fmtTokens(v);
  let best = null;
  for (const scope of ['turn', 'session', 'tree']) {
    const limits = report.budget[scope] || {};
    for (const kind of ['usd', 'tokens', 'time_s', 'tool_calls']) {
      const max = limits[kind];
      if (max === null || max === undefined) continue;
      const spent = ((report.spent || {})[scope] || {})[kind] || 0;
      const fraction = max ? spent / max : 1;
      if (!best || fraction > best.fraction) best = {fraction, text: `${scope} ${kind.replace('_s', '').replace('_', ' ')} ${show(kind, spent)} of ${show(kind, max)}`};
    }
  }
  return best ? best.text : '';
}
