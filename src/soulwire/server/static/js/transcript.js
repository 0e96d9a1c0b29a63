// The live transcript: Wire events ({type, payload}) folded into DOM — user prompts, assistant
// Markdown, collapsible thinking, tool-call cards (arguments, status, output, diffs, duration),
// sub-agents nested in their tool's card. Events are queued and applied once per animation
// frame, and a streaming text block re-renders only its unfinished tail, so a turn of tens of
// thousands of chunks never freezes the page.

import {el, clear, fmtDuration, inputText, fmtTokens} from './util.js';
import {renderMarkdown} from './markdown.js';
import {diffView} from './diff.js';

const OUTPUT_PREVIEW = 20000;

/** Markdown that grows: the finished part (up to the last blank line outside a code fence) is
 * rendered once; only the tail is rendered again as chunks arrive. A long tail (one huge
 * paragraph) is re-parsed at most every few hundred milliseconds, in proportion to its size
 * (over 64 KB: when the text pauses); in between, new text is appended to it as plain text,
 * so each frame stays cheap. */
class TextBlock {
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
      let end = src.indexOf('\n', pos);
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
  constructor(parent, owner) {
    this.owner = owner;
    this.source = '';
    this.summary = el('summary', {text: 'Thinking'});
    this.body = el('div', {class: 'think-body'});
    this.root = el('details', {class: 'thinking'}, this.summary, this.body);
    parent.append(this.root);
  }
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

function argSummary(name, args) {
  let parsed = null;
  try { parsed = JSON.parse(args || '{}'); } catch { return ''; }
  if (!parsed || typeof parsed !== 'object') return '';
  for (const key of ['command', 'path', 'file_path', 'pattern', 'url', 'query', 'description', 'title']) {
    if (typeof parsed[key] === 'string') return parsed[key];
  }
  const first = Object.values(parsed).find(v => typeof v === 'string');
  return first || '';
}

function outputText(output) {
  if (typeof output === 'string') return output;
  if (Array.isArray(output)) return output.map(p => p.type === 'text' ? p.text : `[${p.type}]`).join('');
  return '';
}

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

class ToolCard {
  constructor(parent, call, ts, transcript) {
    this.transcript = transcript;
    this.id = call.id;
    this.name = call.function?.name || 'tool';
    this.args = call.function?.arguments || '';
    this.start = ts;
    this.state = 'running';
    this.icon = el('span', {class: 'status-icon', 'aria-hidden': 'true'});
    this.label = el('span', {class: 'tool-name', text: this.name});
    this.what = el('code', {class: 'tool-what'});
    this.statusText = el('span', {class: 'tool-status', text: 'running'});
    this.duration = el('span', {class: 'tool-dur'});
    this.argsBox = el('div', {class: 'tool-args'});
    this.resultBox = el('div', {class: 'tool-result'});
    this.subBox = null;
    this.details = el('details', {class: 'tool-details', open: true},
      el('summary', null, this.icon, this.label, this.what, this.statusText, this.duration),
      el('div', {class: 'tool-body'}, this.argsBox, this.resultBox));
    this.root = el('div', {class: 'tool running', dataset: {toolCallId: this.id}}, this.details);
    parent.append(this.root);
    this.renderArgs();
  }
  appendArgs(part) {
    this.args += part || '';
    this.transcript.dirty.add(this);
  }
  render() { this.renderArgs(); }
  renderArgs() {
    this.what.textContent = argSummary(this.name, this.args);
    clear(this.argsBox);
    let pretty = this.args;
    try { pretty = JSON.stringify(JSON.parse(this.args), null, 2); } catch { /* still streaming */ }
    if (pretty && pretty !== '{}') {
      this.argsBox.append(el('details', {class: 'args'}, el('summary', {text: 'Arguments'}), el('pre', {text: pretty})));
    }
  }
  setState(state, text) {
    this.state = state;
    this.root.className = `tool ${state}`;
    this.statusText.textContent = text || state;
  }
  finish(value, ts) {
    if (this.start && ts) this.duration.textContent = fmtDuration(ts - this.start);
    clear(this.resultBox);
    const display = value.display || [];
    const brief = display.find(b => b.type === 'brief');
    const rejected = value.is_error && /rejected by the user/i.test(value.message || '');
    this.setState(rejected ? 'rejected' : value.is_error ? 'error' : 'ok', rejected ? 'rejected' : value.is_error ? 'error' : 'done');
    if (brief?.text && !rejected) this.resultBox.append(el('div', {class: 'tool-brief', text: brief.text}));
    else if (rejected && brief?.text && brief.text !== 'Rejected by user') this.resultBox.append(el('div', {class: 'tool-brief', text: brief.text}));
    for (const block of display) {
      if (block.type === 'diff') this.resultBox.append(diffView(block));
      else if (block.type === 'todo') {
        this.resultBox.append(el('ul', {class: 'todo'}, (block.items || []).map(item =>
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
    if (!display.some(b => b.type === 'diff') && !value.is_error && this.name !== 'Agent') this.details.open = text.length < 2000;
  }
  finishByReference(blob, ts) {
    if (this.start && ts) this.duration.textContent = fmtDuration(ts - this.start);
    this.setState('ok', 'done');
    clear(this.resultBox);
    const load = el('button', {type: 'button', class: 'link', text: `Load the full output (${blob.size.toLocaleString()} bytes)`});
    load.addEventListener('click', async () => {
      load.disabled = true;
      const payload = await this.transcript.loadBlob(blob.blob_id);
      if (payload?.return_value) this.finish(payload.return_value, null);
    });
    this.resultBox.append(el('pre', {class: 'tool-output', text: blob.preview}), load);
  }
  interrupt() {
    if (this.state === 'running' || this.state === 'waiting') this.setState('cancelled', 'interrupted');
  }
  sub(agentId, kind) {
    if (!this.subBox) {
      this.subBox = el('div', {class: 'subagent'});
      this.resultBox.before(this.subBox);
      this.subLabel = el('div', {class: 'subagent-head', text: `sub-agent ${kind || ''} ${agentId || ''}`});
      this.subBox.append(this.subLabel);
      this.subTranscript = new Transcript(this.subBox, {nested: true, owner: this.transcript});
    }
    return this.subTranscript;
  }
}

export class Transcript {
  constructor(root, options = {}) {
    this.root = root;
    this.options = options;
    this.owner = options.owner || null;
    this.queue = [];
    this.scheduled = false;
    this.dirty = this.owner ? this.owner.dirty : new Set();
    this.stale = this.owner ? this.owner.stale : new Set();  // text blocks whose Markdown lags
    this.onStatus = options.onStatus || (() => {});
    this.onTurn = options.onTurn || (() => {});
    this.reset();
  }

  reset() {
    clear(this.root);
    this.depth = 0;
    this.turn = null;
    this.text = null;
    this.think = null;
    this.cards = new Map();
    this.approvals = new Map();
    this.lastCard = null;
    this.turnStart = null;
    this.stepUsage = null;
    this.queue.length = 0;
  }

  /** Queue one message; it is applied at the next animation frame. */
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
      try { this.apply(message, ts); } catch (err) { console.error('event', message, err); }
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
    return this.turn.body;
  }

  startTurn(userInput, ts) {
    const body = el('div', {class: 'turn-body'});
    const foot = el('div', {class: 'turn-foot'});
    const section = el('section', {class: 'turn'});
    if (userInput !== null) section.append(this.userBubble(userInput, 'user'));
    section.append(body, foot);
    this.root.append(section);
    this.turn = {section, body, foot};
    this.turnStart = ts;
    this.text = this.think = null;
  }

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

  note(text, cls = 'note') {
    this.container().append(el('div', {class: cls, text}));
    this.text = this.think = null;
  }

  apply(message, ts) {
    const {type} = message;
    const payload = message.payload || {};
    if (message.blob) return this.applyReference(message, ts);
    switch (type) {
      case 'TurnBegin':
        this.depth++;
        if (this.depth === 1 && !this.options.nested) {
          this.startTurn(payload.user_input, ts);
          this.onTurn('begin');
        } else if (!this.turn) this.startTurn(payload.user_input, ts);
        else this.container().append(this.userBubble(payload.user_input, 'nested-input'));
        break;
      case 'TurnEnd':
        this.depth = Math.max(0, this.depth - 1);
        if (this.depth === 0) this.endTurn(ts);
        break;
      case 'StepBegin':
        this.text = this.think = null;
        if (payload.n > 1) this.container().append(el('div', {class: 'step-mark', text: `step ${payload.n}`}));
        break;
      case 'ContentPart':
        this.content(payload);
        break;
      case 'ToolCall': {
        this.text = this.think = null;
        const card = new ToolCard(this.container(), payload, ts, this);
        this.cards.set(card.id, card);
        this.lastCard = card;
        break;
      }
      case 'ToolCallPart':
        this.lastCard?.appendArgs(payload.arguments_part);
        break;
      case 'ToolResult': {
        const card = this.cards.get(payload.tool_call_id);
        if (card) card.finish(payload.return_value || {}, ts);
        break;
      }
      case 'ApprovalRequest': {
        const card = this.cards.get(payload.tool_call_id);
        if (card) { this.approvals.set(payload.id, card); card.setState('waiting', 'awaiting approval'); }
        break;
      }
      case 'ApprovalResponse': {
        const card = this.approvals.get(payload.request_id);
        if (card && card.state === 'waiting') {
          card.setState(payload.response === 'reject' ? 'rejected' : 'running',
            payload.response === 'reject' ? 'rejected' : payload.response === 'approve_for_session' ? 'approved for session' : 'approved');
        }
        break;
      }
      case 'QuestionRequest':
        this.note(`Question: ${(payload.questions || []).map(q => q.question).join(' / ')}`);
        break;
      case 'StatusUpdate':
        this.onStatus(payload);
        break;
      case 'SubagentEvent': {
        const card = this.cards.get(payload.parent_tool_call_id) || this.lastCard;
        if (card) card.sub(payload.agent_id, payload.subagent_type).apply(payload.event || {}, ts);
        break;
      }
      case 'SteerInput':
        this.text = this.think = null;
        this.container().append(this.userBubble(payload.user_input, 'user steer'));
        break;
      case 'StepRetry':
        this.note(`Retrying the step (attempt ${payload.next_attempt} of ${payload.max_attempts}): ${payload.error_type}${payload.status_code ? ` ${payload.status_code}` : ''}`, 'note warn');
        break;
      case 'StepInterrupted':
        this.note('The step was interrupted by an error.', 'note error');
        break;
      case 'CompactionBegin':
        this.note('Compacting the context…');
        break;
      case 'CompactionEnd':
        break;
      case 'PlanDisplay': {
        const box = el('div', {class: 'plan'}, el('div', {class: 'plan-head', text: `Plan · ${payload.file_path || ''}`}));
        box.append(renderMarkdown(payload.content || ''));
        this.container().append(box);
        this.text = this.think = null;
        break;
      }
      case 'HookTriggered': case 'HookResolved': case 'MCPLoadingBegin': case 'MCPLoadingEnd':
      case 'BtwBegin': case 'BtwEnd': case 'ToolCallRequest': case 'HookRequest':
        break;
      case 'Notification':
        this.note(`${payload.title || 'Notification'}: ${payload.body || ''}`);
        break;
      default:
        break;
    }
  }

  content(part) {
    if (part.type === 'text') {
      if (this.think) this.think = null;
      if (!this.text) this.text = new TextBlock(this.container(), 'assistant md', this.owner || this);
      this.text.append(part.text || '');
    } else if (part.type === 'think') {
      if (!this.think) { this.text = null; this.think = new ThinkBlock(this.container(), this.owner || this); }
      this.think.append(part.think || '');
    } else if (part.type === 'image_url' && /^data:image\//.test(part.image_url?.url || '')) {
      this.container().append(el('img', {class: 'user-image', src: part.image_url.url, alt: 'image from the model'}));
    } else {
      this.note(`[${part.type}]`);
    }
  }

  applyReference(message, ts) {
    if (message.type === 'ToolCall') {  // huge arguments (a file's content): the card, args on demand
      const preview = message.blob.preview || '';
      const id = /"id":\s*"([^"]+)"/.exec(preview)?.[1];
      const name = /"name":\s*"([^"]+)"/.exec(preview)?.[1] || 'tool';
      if (id) {
        this.text = this.think = null;
        const card = new ToolCard(this.container(), {id, function: {name, arguments: ''}}, ts, this);
        this.cards.set(id, card);
        this.lastCard = card;
        const load = el('button', {type: 'button', class: 'link', text: `Load the arguments (${message.blob.size.toLocaleString()} bytes)`});
        load.addEventListener('click', async () => {
          load.disabled = true;
          const payload = await this.loadBlob(message.blob.blob_id);
          if (payload?.function) { card.args = payload.function.arguments || ''; card.renderArgs(); card.argsBox.querySelector('details')?.setAttribute('open', ''); }
        });
        card.argsBox.after(load);
        return;
      }
    }
    if (message.type === 'ToolResult') {
      const id = /"tool_call_id":\s*"([^"]+)"/.exec(message.blob.preview || '')?.[1];
      const card = id && this.cards.get(id);
      if (card) { card.finishByReference(message.blob, ts); return; }
    }
    const box = el('div', {class: 'note'}, `${message.type}: ${message.blob.size.toLocaleString()} bytes `);
    const load = el('button', {type: 'button', class: 'link', text: 'load'});
    load.addEventListener('click', async () => {
      const payload = await this.loadBlob(message.blob.blob_id);
      if (payload) box.replaceWith(el('pre', {class: 'tool-output', text: JSON.stringify(payload, null, 2)}));
    });
    box.append(load);
    this.container().append(box);
  }

  async loadBlob(blobId) {
    const top = this.owner || this;
    return top.options.loadBlob ? top.options.loadBlob(blobId) : null;
  }

  endTurn(ts) {
    this.settle();
    for (const card of this.cards.values()) card.interrupt();
    if (this.turn) {
      const parts = [];
      if (this.turnStart && ts) parts.push(fmtDuration(ts - this.turnStart));
      if (this.stepUsage) parts.push(`${fmtTokens(this.stepUsage)} tokens`);
      this.turn.foot.textContent = parts.join(' · ');
    }
    this.text = this.think = null;
    this.stepUsage = null;
    if (!this.options.nested) this.onTurn('end');
  }

  addUsage(usage) {
    if (!usage) return;
    this.stepUsage = (this.stepUsage || 0) + (usage.input_other || 0) + (usage.output || 0) +
      (usage.input_cache_read || 0) + (usage.input_cache_creation || 0);
  }
}
