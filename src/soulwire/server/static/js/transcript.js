// @ts-check
// The live transcript: the session tree of fold.js drawn as it grows — user prompts, assistant
// Markdown, collapsible thinking, tool-call cards (arguments, status, output, diffs, duration),
// sub-agents nested in their tool's card. Events are queued and folded once per animation
// frame, and a streaming text block re-renders only its unfinished tail, so a turn of tens of
// thousands of chunks never freezes the page.

import {el, clear, fmtDuration, inputText, fmtTokens} from './util.js';
import {renderMarkdown} from './markdown.js';
import {diffView} from './diff.js';
import {Fold, usageTotal} from './fold.js';
import {OverlayCards} from './overlay.js';

/** @typedef {import('./fold.js').Message} Message */
/** @typedef {import('./fold.js').Payload} Payload */
/** @typedef {import('./fold.js').BlobRef} BlobRef */
/** @typedef {import('./fold.js').Turn} Turn */
/** @typedef {import('./fold.js').Step} Step */
/** @typedef {import('./fold.js').Entry} Entry */
/** @typedef {import('./fold.js').Tool} Tool */
/** @typedef {import('./fold.js').Agent} Agent */
/** @typedef {import('./fold.js').TextEntry} TextEntry */
/** @typedef {import('./fold.js').ThinkEntry} ThinkEntry */
/** @typedef {import('./fold.js').FoldObserver} FoldObserver */
/** @typedef {{render(final?: boolean): void}} Renderable  a view redrawn once per frame when dirty */
/**
 * @typedef {object} TranscriptOptions
 * @property {HTMLElement} [scroller]  kept at the bottom while new output arrives, if it was there
 * @property {boolean} [nested]  a sub-agent's transcript inside its tool's card
 * @property {Transcript} [owner]  the top transcript (it renders, and loads blobs, for all)
 * @property {Fold} [fold]  the fold to draw (a sub-agent's); a new one by default
 * @property {(status: Payload) => void} [onStatus]
 * @property {(phase: 'begin' | 'end') => void} [onTurn]
 * @property {(blobId: string) => Promise<any>} [loadBlob]
 * @property {import('./overlay.js').OverlayAct} [onOverlay]  commit or discard the overlay's pending writes
 * @property {import('./overlay.js').OverlayDiff} [onOverlayDiff]  show a pending file's diff
 */

const OUTPUT_PREVIEW = 20000;

/** Markdown that grows: the finished part (up to the last blank line outside a code fence) is
 * rendered once; only the tail is rendered again as chunks arrive. A long tail (one huge
 * paragraph) is re-parsed at most every few hundred milliseconds, in proportion to its size
 * (over 64 KB: when the text pauses); in between, new text is appended to it as plain text,
 * so each frame stays cheap. */
class TextBlock {
  /** @param {HTMLElement} parent @param {string} cls @param {Transcript} owner */
  constructor(parent, cls, owner) {
    this.owner = owner;
    this.source = '';
    this.done = 0;
    this.delta = '';
    this.lastFull = 0;
    this.stable = el('div');
    this.tail = el('div');
    this.root = el('div', {class: cls}, this.stable, this.tail);
    parent.append(this.root);
  }
  /** @param {string} text */
  append(text) {
    this.source += text;
    this.delta += text;
    this.owner.dirty.add(this);
  }
  render(final = false) {
    const src = this.source;
    let boundary = this.done;
    let inFence = false;
    let pos = this.done;
    while (pos < src.length) {
      const end = src.indexOf('\n', pos);
      if (end < 0) break;  // the last line may still grow
      const line = src.slice(pos, end);
      if (/^ {0,3}(`{3,}|~{3,})/.test(line)) inFence = !inFence;
      else if (!inFence && !line.trim()) boundary = end + 1;
      pos = end + 1;
    }
    if (boundary > this.done) {
      this.stable.append(renderMarkdown(src.slice(this.done, boundary)));
      this.done = boundary;
      this.lastFull = 0;
    }
    const tail = src.length - this.done;
    const now = performance.now();
    // Over 64 KB the tail is re-parsed only once the text stops coming (a pause, the block's or
    // the turn's end): a re-parse that size is a long task, and it would repeat.
    const wait = tail > 65536 ? Infinity : Math.min(1500, tail / 200);
    if (!final && tail > 4000 && this.delta && this.lastFull && now - this.lastFull < wait) {
      if (tail > 65536) {
        // Laying out the whole giant paragraph every frame is what would freeze the page: while
        // it streams, show its last 32 KB as plain text (all of it, as Markdown, at the pause).
        clear(this.tail).append(el('p', {class: 'streaming-tail', text: `…${src.slice(-32768)}`}));
      } else (this.tail.lastElementChild || this.tail).append(this.delta);
      this.delta = '';
      this.owner.stale.add(this);
      return;
    }
    clear(this.tail).append(renderMarkdown(src.slice(this.done)));
    this.delta = '';
    this.lastFull = now;
    this.owner.stale.delete(this);
  }
}

class ThinkBlock {
  /** @param {HTMLElement} parent @param {Transcript} owner */
  constructor(parent, owner) {
    this.owner = owner;
    this.source = '';
    this.summary = el('summary', {text: 'Thinking'});
    this.body = el('div', {class: 'think-body'});
    this.root = el('details', {class: 'thinking'}, this.summary, this.body);
    parent.append(this.root);
  }
  /** @param {string} text */
  append(text) {
    this.source += text;
    this.owner.dirty.add(this);
  }
  render() {
    this.body.textContent = this.source;
    const words = this.source.trim().split(/\s+/).filter(Boolean).length;
    this.summary.textContent = `Thinking · ${words} word${words === 1 ? '' : 's'}`;
  }
}

/** What a tool call is about, from its arguments (a command, a path, a pattern…). @param {string} args */
function argSummary(args) {
  /** @type {unknown} */
  let parsed;
  try { parsed = JSON.parse(args || '{}'); } catch { return ''; }
  if (!parsed || typeof parsed !== 'object') return '';
  const fields = /** @type {Record<string, unknown>} */ (parsed);
  for (const key of ['command', 'path', 'file_path', 'pattern', 'url', 'query', 'description', 'title']) {
    const value = fields[key];
    if (typeof value === 'string') return value;
  }
  const first = Object.values(fields).find(v => typeof v === 'string');
  return typeof first === 'string' ? first : '';
}

/** @param {unknown} output */
function outputText(output) {
  if (typeof output === 'string') return output;
  if (Array.isArray(output)) return output.map(p => p.type === 'text' ? p.text : `[${p.type}]`).join('');
  return '';
}

/** @param {string} text @param {string} cls */
function preBlock(text, cls) {
  const pre = el('pre', {class: cls});
  if (text.length <= OUTPUT_PREVIEW) {
    pre.textContent = text;
    return pre;
  }
  pre.textContent = text.slice(0, OUTPUT_PREVIEW);
  const more = el('button', {type: 'button', class: 'link', text: `Show all ${text.length.toLocaleString()} characters`});
  more.addEventListener('click', () => { pre.textContent = text; more.remove(); });
  return el('div', null, pre, more);
}

const APPROVED = /** @type {Record<string, string>} */ ({approve: 'approved', approve_for_session: 'approved for session'});

class ToolCard {
  /** @param {HTMLElement} parent @param {Tool} tool @param {Transcript} transcript */
  constructor(parent, tool, transcript) {
    this.transcript = transcript;
    this.tool = tool;
    /** @type {string | null} arguments loaded on demand (they came by reference) */
    this.loadedArgs = null;
    this.state = 'running';
    this.icon = el('span', {class: 'status-icon', 'aria-hidden': 'true'});
    this.label = el('span', {class: 'tool-name', text: tool.name});
    this.what = el('code', {class: 'tool-what'});
    this.statusText = el('span', {class: 'tool-status', text: 'running'});
    this.duration = el('span', {class: 'tool-dur'});
    this.argsBox = el('div', {class: 'tool-args'});
    this.resultBox = el('div', {class: 'tool-result'});
    /** @type {HTMLElement | null} */
    this.subBox = null;
    this.details = el('details', {class: 'tool-details', open: true},
      el('summary', null, this.icon, this.label, this.what, this.statusText, this.duration),
      el('div', {class: 'tool-body'}, this.argsBox, this.resultBox));
    this.root = el('div', {class: 'tool running', dataset: {toolCallId: tool.id}}, this.details);
    parent.append(this.root);
    this.renderArgs();
    if (tool.argsBlob) this.offerArgs(tool.argsBlob);
  }

  get args() {
    return this.loadedArgs ?? this.tool.args ?? '';
  }

  render() { this.renderArgs(); }

  renderArgs() {
    this.what.textContent = argSummary(this.args);
    clear(this.argsBox);
    let pretty = this.args;
    try { pretty = JSON.stringify(JSON.parse(this.args), null, 2); } catch { /* still streaming */ }
    if (pretty && pretty !== '{}') {
      this.argsBox.append(el('details', {class: 'args'}, el('summary', {text: 'Arguments'}), el('pre', {text: pretty})));
    }
  }

  /** Huge arguments (a file's content) came by reference: a button loads them. @param {BlobRef} blob */
  offerArgs(blob) {
    const load = el('button', {type: 'button', class: 'link', text: `Load the arguments (${blob.size.toLocaleString()} bytes)`});
    load.addEventListener('click', async () => {
      load.disabled = true;
      const payload = await this.transcript.loadBlob(blob.blob_id);
      if (payload?.function) {
        this.loadedArgs = payload.function.arguments || '';
        this.renderArgs();
        this.argsBox.querySelector('details')?.setAttribute('open', '');
      }
    });
    this.argsBox.after(load);
  }

  /** @param {string} state @param {string} [text] */
  setState(state, text) {
    this.state = state;
    this.root.className = `tool ${state}`;
    this.statusText.textContent = text || state;
  }

  /** Show the tool's status as the fold has it now. */
  update() {
    const tool = this.tool;
    if (tool.resultBlob) this.finishByReference(tool.resultBlob, tool.end);
    else if (tool.result) this.finish(tool.result, tool.end);
    else if (tool.status === 'waiting') this.setState('waiting', 'awaiting approval');
    else if (tool.status === 'running') this.setState('running', APPROVED[tool.approval || ''] || 'running');
    else if (tool.status === 'rejected') this.setState('rejected', 'rejected');
    else if (tool.status === 'interrupted') this.setState('cancelled', 'interrupted');
  }

  /** @param {number | null} ts */
  showDuration(ts) {
    if (this.tool.start && ts) this.duration.textContent = fmtDuration(ts - this.tool.start);
  }

  /** @param {Payload} value the tool's return value @param {number | null} ts */
  finish(value, ts) {
    this.showDuration(ts);
    clear(this.resultBox);
    /** @type {Payload[]} */
    const display = value.display || [];
    const brief = display.find(b => b.type === 'brief');
    const rejected = value.is_error && /rejected by the user/i.test(value.message || '');
    if (this.tool.status === 'interrupted') this.setState('cancelled', 'interrupted');  // cut short: its result says why
    else this.setState(rejected ? 'rejected' : value.is_error ? 'error' : 'ok', rejected ? 'rejected' : value.is_error ? 'error' : 'done');
    if (brief?.text && !rejected) this.resultBox.append(el('div', {class: 'tool-brief', text: brief.text}));
    else if (rejected && brief?.text && brief.text !== 'Rejected by user') this.resultBox.append(el('div', {class: 'tool-brief', text: brief.text}));
    for (const block of display) {
      if (block.type === 'diff') this.resultBox.append(diffView(block));
      else if (block.type === 'todo') {
        this.resultBox.append(el('ul', {class: 'todo'}, (block.items || []).map((/** @type {Payload} */ item) =>
          el('li', {class: `todo-${item.status}`, text: item.title}))));
      } else if (block.type === 'shell') this.resultBox.append(el('div', {class: 'shell-cmd'}, el('code', {text: `$ ${block.command}`})));
      else if (block.type === 'background_task') {
        this.resultBox.append(el('div', {class: 'note', text: `background ${block.kind} ${block.task_id}: ${block.status} — ${block.description}`}));
      }
    }
    if (value.is_error && value.message) this.resultBox.append(el('div', {class: 'tool-message', text: value.message}));
    const text = outputText(value.output);
    if (text) this.resultBox.append(preBlock(text, 'tool-output'));
    if (!display.some(b => b.type === 'diff') && !value.is_error && !text) {
      this.resultBox.append(el('div', {class: 'muted', text: value.message || 'no output'}));
    }
    if (!display.some(b => b.type === 'diff') && !value.is_error && this.tool.name !== 'Agent') this.details.open = text.length < 2000;
  }

  /** @param {BlobRef} blob @param {number | null} ts */
  finishByReference(blob, ts) {
    this.showDuration(ts);
    this.setState('ok', 'done');
    clear(this.resultBox);
    const load = el('button', {type: 'button', class: 'link', text: `Load the full output (${blob.size.toLocaleString()} bytes)`});
    load.addEventListener('click', async () => {
      load.disabled = true;
      const payload = await this.transcript.loadBlob(blob.blob_id);
      if (payload?.return_value) this.finish(payload.return_value, null);
    });
    this.resultBox.append(el('pre', {class: 'tool-output', text: blob.preview || ''}), load);
  }

  /** The transcript of a sub-agent this call started. @param {Agent} agent */
  sub(agent) {
    if (!this.subBox) {
      this.subBox = el('div', {class: 'subagent'});
      this.resultBox.before(this.subBox);
    }
    return subTranscript(this.subBox, agent, this.transcript);
  }
}

/** A sub-agent's transcript in `box`, following the agent's own fold. @param {HTMLElement} box @param {Agent} agent @param {Transcript} parent */
function subTranscript(box, agent, parent) {
  box.append(el('div', {class: 'subagent-head', text: `sub-agent ${agent.type} ${agent.id}`}));
  const body = el('div');
  box.append(body);
  return new Transcript(body, {nested: true, owner: parent.owner || parent, fold: agent.fold});
}

/** @implements {FoldObserver} */
export class Transcript {
  /** @param {HTMLElement} root @param {TranscriptOptions} [options] */
  constructor(root, options = {}) {
    this.root = root;
    this.options = options;
    /** @type {Transcript | null} */
    this.owner = options.owner || null;
    /** @type {[Message, number][]} */
    this.queue = [];
    this.scheduled = false;
    /** @type {ReturnType<typeof setTimeout> | null} */
    this.staleTimer = null;
    /** @type {Set<Renderable>} */
    this.dirty = this.owner ? this.owner.dirty : new Set();
    /** text blocks whose Markdown lags @type {Set<TextBlock>} */
    this.stale = this.owner ? this.owner.stale : new Set();
    this.onStatus = options.onStatus || (() => {});
    this.onTurn = options.onTurn || (() => {});
    /** @type {{section: HTMLElement, body: HTMLElement, foot: HTMLElement, turn: Turn | null} | null} */
    this.turn = null;
    /** the number of the last prompted turn drawn (a drawn history's tail starts past 0); each
     * turn's section carries it as `data-turn` (the engine's turn numbers: checkpoints) */
    this.turnCount = 0;
    /** the view of each entry drawn so far @type {Map<object, TextBlock | ThinkBlock | ToolCard>} */
    this.views = new Map();
    this.fold = options.fold || new Fold();
    this.fold.observer = this;
    this.overlays = new OverlayCards();
    clear(root);
  }

  /** Start again, empty, with a new fold. */
  reset() {
    clear(this.root);
    this.turn = null;
    this.turnCount = 0;
    this.views.clear();
    this.queue.length = 0;
    this.fold = new Fold(this);
    this.overlays = new OverlayCards();
  }

  /** Queue one message; it is applied at the next animation frame. @param {Message} message @param {number} [ts] */
  push(message, ts) {
    this.queue.push([message, ts ?? Date.now() / 1000]);
    if (!this.scheduled) {
      this.scheduled = true;
      requestAnimationFrame(() => this.flush());
    }
  }

  /** Apply every queued message now and render what changed. */
  flush() {
    this.scheduled = false;
    const scroller = this.options.scroller;
    const stick = scroller && scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
    const batch = this.queue.splice(0);
    for (const [message, ts] of batch) {
      try { this.fold.push(message, ts); } catch (err) { console.error('event', message, err); }
    }
    for (const block of this.dirty) block.render();
    this.dirty.clear();
    if (stick) scroller.scrollTop = scroller.scrollHeight;
    if (this.stale.size && !this.staleTimer) {
      this.staleTimer = setTimeout(() => {
        this.staleTimer = null;
        for (const block of this.stale) this.dirty.add(block);
        this.flush();
      }, 300);
    }
  }

  /** Bring every lagging text block's Markdown up to date (a block or the turn ended). */
  settle() {
    for (const block of [...this.stale]) block.render(true);
  }

  container() {
    if (!this.turn) this.startTurn(null, null);
    return /** @type {NonNullable<Transcript['turn']>} */ (this.turn).body;
  }

  /** @param {unknown} userInput null: output before any prompt @param {Turn | null} turn */
  startTurn(userInput, turn) {
    const body = el('div', {class: 'turn-body'});
    const foot = el('div', {class: 'turn-foot'});
    const section = el('section', {class: 'turn'});
    if (userInput !== null) section.append(this.userBubble(userInput, 'user'));
    if (turn !== null && !this.options.nested) section.dataset.turn = String(++this.turnCount);
    section.append(body, foot);
    this.root.append(section);
    this.turn = {section, body, foot, turn};
  }

  /** @param {unknown} input @param {string} cls */
  userBubble(input, cls) {
    const bubble = el('div', {class: cls});
    bubble.append(el('div', {class: 'user-text', text: inputText(input)}));
    if (Array.isArray(input)) {
      for (const part of input) {
        if (part.type === 'image_url' && /^data:image\//.test(part.image_url?.url || '')) {
          bubble.append(el('img', {class: 'user-image', src: part.image_url.url, alt: 'attached image'}));
        }
      }
    }
    return bubble;
  }

  /** A line of its own in the transcript (what the page itself says: a stop, a failure). @param {string} text */
  note(text, cls = 'note') {
    this.fold.flush();  // text after the note is a new block, below it
    this.container().append(el('div', {class: cls, text}));
  }

  // -- the fold's observer ------------------------------------------------------------------

  /** @param {Turn} turn */
  turnBegin(turn) {
    if (this.options.nested && this.turn) {
      this.container().append(this.userBubble(turn.input, 'nested-input'));
      return;
    }
    this.startTurn(turn.input, turn);
    if (!this.options.nested) this.onTurn('begin');
  }

  /** @param {Turn} _turn @param {unknown} input */
  nestedInput(_turn, input) {
    this.container().append(this.userBubble(input, 'nested-input'));
  }

  /** @param {Turn} turn */
  turnEnd(turn) {
    this.settle();
    if (this.turn) {
      const parts = [];
      if (turn.start && turn.end) parts.push(fmtDuration(turn.end - turn.start));
      const tokens = usageTotal(turn.usage);
      if (tokens) parts.push(`${fmtTokens(tokens)} tokens`);
      this.turn.foot.textContent = parts.join(' · ');
    }
    if (!this.options.nested) this.onTurn('end');
  }

  /** @param {Step} step */
  stepBegin(step) {
    if (step.n > 1) this.container().append(el('div', {class: 'step-mark', text: `step ${step.n}`}));
  }

  /** @param {Entry} entry */
  entry(entry) {
    const owner = this.owner || this;
    switch (entry.kind) {
      case 'text': {
        const block = new TextBlock(this.container(), 'assistant md', owner);
        block.append(entry.text);
        this.views.set(entry, block);
        return;
      }
      case 'think': {
        const block = new ThinkBlock(this.container(), owner);
        block.append(entry.text);
        this.views.set(entry, block);
        return;
      }
      case 'tool':
        this.views.set(entry, new ToolCard(this.container(), entry, this));
        return;
      case 'agent': {  // a sub-agent no tool call owns
        const box = el('div', {class: 'subagent'});
        this.container().append(box);
        entry.fold.observer = subTranscript(box, entry, this);
        return;
      }
      case 'part': {
        const part = entry.part;
        if (part.type === 'image_url' && /^data:image\//.test(part.image_url?.url || '')) {
          this.container().append(el('img', {class: 'user-image', src: part.image_url.url, alt: 'image from the model'}));
        } else this.container().append(el('div', {class: 'note', text: `[${part.type}]`}));
        return;
      }
      default:
        this.event(entry.item.message);
    }
  }

  /** @param {TextEntry | ThinkEntry} entry @param {string} added */
  grow(entry, added) {
    const view = this.views.get(entry);
    if (view instanceof TextBlock || view instanceof ThinkBlock) view.append(added);
  }

  /** @param {Tool} tool */
  args(tool) {
    const card = this.views.get(tool);
    if (card) this.dirty.add(card);
  }

  /** @param {Tool} tool */
  status(tool) {
    const card = this.views.get(tool);
    if (card instanceof ToolCard) card.update();
  }

  /** @param {Agent} agent @param {Tool | null} parent */
  agent(agent, parent) {
    const card = parent && this.views.get(parent);
    if (card instanceof ToolCard) agent.fold.observer = card.sub(agent);
  }

  /** @param {Payload} payload */
  statusUpdate(payload) {
    this.onStatus(payload);
  }

  /** An event shown in place (a note, a plan, a steer, a payload sent by reference). @param {Message} message */
  event(message) {
    const payload = message.payload || {};
    if (message.blob) { this.reference(message.type, message.blob); return; }
    switch (message.type) {
      case 'QuestionRequest':
        this.line(`Question: ${(payload.questions || []).map((/** @type {Payload} */ q) => q.question).join(' / ')}`);
        break;
      case 'BudgetUpdate':
        this.onStatus({budget: payload});
        break;
      case 'BudgetExceeded':
        this.line(`Budget: the ${payload.scope} ${payload.limit} limit (${payload.max}) is reached. Raise it with /budget and ask to continue.`);
        break;
      case 'SteerInput':
        this.container().append(this.userBubble(payload.user_input, 'user steer'));
        break;
      case 'StepRetry':
        this.line(`Retrying the step (attempt ${payload.next_attempt} of ${payload.max_attempts}): ${payload.error_type}${payload.status_code ? ` ${payload.status_code}` : ''}`, 'note warn');
        break;
      case 'StepInterrupted':
        this.line('The step was interrupted by an error.', 'note error');
        break;
      case 'CompactionBegin':
        this.line('Compacting the context…');
        break;
      case 'PlanDisplay': {
        const box = el('div', {class: 'plan'}, el('div', {class: 'plan-head', text: `Plan · ${payload.file_path || ''}`}));
        box.append(renderMarkdown(payload.content || ''));
        this.container().append(box);
        break;
      }
      case 'Notification':
        this.line(`${payload.title || 'Notification'}: ${payload.body || ''}`);
        break;
      case 'OverlayPending':
        this.overlays.pending(this.container(), payload, this.options.onOverlay, this.options.onOverlayDiff);
        break;
      case 'OverlayApplied':
        this.line(this.overlays.applied(payload), 'note overlay-applied');
        break;
      case 'ResolvedBy': {  // the server's notice: which named user answered a request
        const verb = {approve: 'Approved', approve_for_session: 'Approved for the session', reject: 'Rejected'}[String(payload.response)] || 'Answered';
        this.line(`${verb} by ${payload.user}`, 'note resolved-by');
        break;
      }
      default:  // the rest (hooks, MCP loading, side questions…) are not drawn
        break;
    }
  }

  /** @param {string} text */
  line(text, cls = 'note') {
    this.container().append(el('div', {class: cls, text}));
  }

  /** A message whose payload comes on demand. @param {string} type @param {BlobRef} blob */
  reference(type, blob) {
    const box = el('div', {class: 'note'}, `${type}: ${blob.size.toLocaleString()} bytes `);
    const load = el('button', {type: 'button', class: 'link', text: 'load'});
    load.addEventListener('click', async () => {
      const payload = await this.loadBlob(blob.blob_id);
      if (payload) box.replaceWith(el('pre', {class: 'tool-output', text: JSON.stringify(payload, null, 2)}));
    });
    box.append(load);
    this.container().append(box);
  }

  /** @param {string} blobId @returns {Promise<any>} */
  async loadBlob(blobId) {
    const top = this.owner || this;
    return top.options.loadBlob ? top.options.loadBlob(blobId) : null;
  }
}
