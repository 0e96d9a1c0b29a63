// @ts-check
// The web UI's one fold: Wire events folded into turns → steps → entries (text, thinking, media,
// tool calls with their arguments, approvals and results, sub-agents, notes), with each node's
// times, token usage and raw events. The live transcript draws it as it grows (through a
// `FoldObserver`); the trace view and the Markdown export read the finished tree.
//
// Streamed parts are merged as `soulwire.wire.fold` merges them: `Run`, `Merger`, `fold` and
// `assemble` here are that module's, and tests/js/fold_vectors.json — written by the Python fold
// (tests/unit/test_fold_vectors.py) and read by tests/js/fold.test.js — keeps the two equal.

/** @typedef {Record<string, any>} Payload */
/** @typedef {{blob_id: string, size: number, preview?: string}} BlobRef  a payload sent by reference */
/** @typedef {{type: string, payload?: Payload, blob?: BlobRef}} Message  an event or request envelope */
/** @typedef {{ts: number, message: Message}} Item  a message and when it happened (epoch seconds) */
/**
 * @typedef {object} Usage  token usage, as `StatusUpdate.token_usage` carries it
 * @property {number} [input_other]
 * @property {number} [output]
 * @property {number} [input_cache_read]
 * @property {number} [input_cache_creation]
 */
/** @typedef {'text' | 'think' | 'call' | 'call-part'} PartKind */

const USAGE_KEYS = /** @type {const} */ (['input_other', 'output', 'input_cache_read', 'input_cache_creation']);

/** Every token of `usage` (input, output, cache reads and writes). */
export function usageTotal(/** @type {Usage | null | undefined} */ usage) {
  return usage ? USAGE_KEYS.reduce((sum, key) => sum + (usage[key] || 0), 0) : 0;
}

/** Add `usage` into `into`, key by key; returns `into`. */
export function addUsage(/** @type {Usage} */ into, /** @type {Usage | null | undefined} */ usage) {
  for (const key of USAGE_KEYS) into[key] = (into[key] || 0) + (usage?.[key] || 0);
  return into;
}

// -- the part merge (soulwire.wire.fold) ---------------------------------------------------------

/** What kind of mergeable part `message` is, or null (an event, a media part, a reference). */
export function partKind(/** @type {Message} */ message) {
  if (message.blob) return null;  // its payload is not here: nothing to merge
  const payload = message.payload || {};
  switch (message.type) {
    case 'ContentPart':
      return payload.type === 'text' ? 'text' : payload.type === 'think' ? 'think' : null;
    case 'ToolCall': return 'call';
    case 'ToolCallPart': return 'call-part';
    default: return null;
  }
}

/** One run of mergeable parts: adjacent text chunks, adjacent thinking chunks (a chunk carrying
 * a signature closes the run), or a tool call (or a lone argument fragment) with the argument
 * fragments that follow it. */
export class Run {
  /** @param {Message} head @param {PartKind} kind */
  constructor(head, kind) {
    const payload = head.payload || {};
    this.head = head;
    this.kind = kind;
    /** @type {string | null} */
    this.encrypted = null;
    /** Everything appended so far (text, thinking or arguments). */
    this.text = '';
    if (kind === 'text') this.text = str(payload.text);
    else if (kind === 'think') { this.text = str(payload.think); this.encrypted = payload.encrypted ?? null; }
    else if (kind === 'call') this.text = str(payload.function?.arguments);
    else this.text = str(payload.arguments_part);
  }

  /** Add `message` to this run if it continues it: the text it adds ('' for none), or null
   * when it does not continue the run. */
  absorb(/** @type {Message} */ message) {
    const kind = partKind(message);
    const payload = message.payload || {};
    if (this.kind === 'text' && kind === 'text') return this.add(str(payload.text));
    if (this.kind === 'think' && kind === 'think' && this.encrypted === null) {
      this.encrypted = payload.encrypted ?? null;
      return this.add(str(payload.think));
    }
    if ((this.kind === 'call' || this.kind === 'call-part') && kind === 'call-part') return this.add(str(payload.arguments_part));
    return null;
  }

  /** @param {string} text */
  add(text) {
    this.text += text;
    return text;
  }

  /** The merged message, as the Python fold's envelope spells it (nulls included). */
  result() {
    const payload = this.head.payload || {};
    switch (this.kind) {
      case 'text': return {type: 'ContentPart', payload: {type: 'text', text: this.text}};
      case 'think': return {type: 'ContentPart', payload: {type: 'think', think: this.text, encrypted: this.encrypted}};
      case 'call': {
        const given = payload.function?.arguments;
        const args = given !== null && given !== undefined ? this.text : this.text || null;
        return {
          type: 'ToolCall',
          payload: {type: 'function', id: payload.id, function: {name: payload.function?.name, arguments: args}, extras: payload.extras ?? null},
        };
      }
      default: return {type: 'ToolCallPart', payload: {arguments_part: this.text || null}};
    }
  }
}

/** @param {unknown} value */
function str(value) {
  return typeof value === 'string' ? value : '';
}

/**
 * What a live consumer of a `Merger` is told while a run grows (the merged message reaches
 * `deliver` only once the run cannot grow).
 * @typedef {object} RunObserver
 * @property {(run: Run) => void} [open]  a run started (its head's text is `run.text`)
 * @property {(run: Run, added: string) => void} [grow]  a message continued the run
 */

/** Folds a live stream: `push` every message; merged ones reach `deliver` as soon as they cannot
 * grow (the next message does not continue them, or `flush` is called). */
export class Merger {
  /** @param {(message: Message) => void} deliver @param {RunObserver} [live] */
  constructor(deliver, live = {}) {
    this.deliver = deliver;
    this.live = live;
    /** The run still growing (null between runs). @type {Run | null} */
    this.run = null;
  }

  push(/** @type {Message} */ message) {
    const run = this.run;
    if (run) {
      const added = run.absorb(message);
      if (added !== null) { this.live.grow?.(run, added); return; }
    }
    this.flush();
    const kind = partKind(message);
    if (kind) {
      this.run = new Run(message, kind);
      this.live.open?.(this.run);
    } else this.deliver(message);
  }

  /** Deliver the open run, if any. */
  flush() {
    const run = this.run;
    this.run = null;
    if (run) this.deliver(run.result());
  }
}

/** The merged form of a finished stream. */
export function fold(/** @type {Iterable<Message>} */ messages) {
  /** @type {Message[]} */
  const out = [];
  const merger = new Merger(message => out.push(message));
  for (const message of messages) merger.push(message);
  merger.flush();
  return out;
}

const CONTENT_TYPES = new Set(['text', 'think', 'image_url', 'audio_url', 'video_url']);

/** One step's reply: its content parts' payloads (text and thinking merged, media as they came)
 * and its tool calls' payloads with their arguments assembled. An argument fragment always
 * belongs to the latest tool call, even when other output came between them. */
export function assemble(/** @type {Iterable<Message>} */ messages) {
  /** @type {Payload[]} */
  const parts = [];
  /** @type {Payload[]} */
  const calls = [];
  for (const message of fold(messages)) {
    const payload = message.payload || {};
    if (message.type === 'ToolCall') calls.push(payload);
    else if (message.type === 'ToolCallPart') {
      const last = calls[calls.length - 1];
      if (last && payload.arguments_part !== null) {
        calls[calls.length - 1] = {...last, function: {...last.function, arguments: (last.function.arguments ?? '') + payload.arguments_part}};
      }
    } else if (message.type === 'ContentPart' && CONTENT_TYPES.has(payload.type)) parts.push(payload);
  }
  return {parts, calls};
}

// -- the session tree ------------------------------------------------------------------------------

/** @typedef {'running' | 'waiting' | 'ok' | 'error' | 'rejected' | 'interrupted'} ToolStatus */
/**
 * @typedef {object} Turn
 * @property {'turn'} kind
 * @property {unknown} input  the prompt (a string or content parts); null before the first TurnBegin
 * @property {number} start
 * @property {number | null} end
 * @property {Step[]} steps
 * @property {Item[]} events
 * @property {Usage} usage  the sum of its steps' usage (its sub-agents' not included)
 */
/**
 * @typedef {object} Step
 * @property {'step'} kind
 * @property {number} n  0 for output before any StepBegin
 * @property {number} start
 * @property {number | null} end
 * @property {Entry[]} entries  what the step produced, in order
 * @property {(Tool | Agent)[]} tools  its tool calls, and sub-agents no tool call owns
 * @property {number} retries
 * @property {boolean} error  the step was interrupted by an error
 * @property {Usage | null} usage  the sum of its StatusUpdates' usage (null: none reported)
 * @property {number | null} context  the last context use reported (0–1)
 * @property {Item[]} events
 */
/** @typedef {{kind: 'text', text: string, open: boolean}} TextEntry  assistant text (Markdown) */
/** @typedef {{kind: 'think', text: string, encrypted: string | null, open: boolean}} ThinkEntry */
/** @typedef {{kind: 'part', part: Payload}} PartEntry  another content part (an image, audio…) */
/** @typedef {{kind: 'event', item: Item}} EventEntry  anything else shown in place (a note, a plan, a steer) */
/**
 * @typedef {object} Tool
 * @property {'tool'} kind
 * @property {string} id
 * @property {string} name
 * @property {string | null} args  the assembled arguments (null: none given)
 * @property {BlobRef | null} argsBlob  arguments too large to send: load on demand
 * @property {ToolStatus} status
 * @property {string | null} approval  the answer to its approval request, if any
 * @property {Payload | null} result  the tool's return value
 * @property {BlobRef | null} resultBlob  a return value too large to send: load on demand
 * @property {number} start
 * @property {number | null} end
 * @property {Agent[]} agents
 * @property {Item[]} events
 */
/**
 * @typedef {object} Agent
 * @property {'agent'} kind
 * @property {string} id
 * @property {string} type  the sub-agent's type, '' when not given
 * @property {number} start
 * @property {number} end  its latest event
 * @property {Fold} fold  its own events, folded the same way
 * @property {Item[]} events
 */
/** @typedef {TextEntry | ThinkEntry | PartEntry | EventEntry | Tool | Agent} Entry */

/**
 * What a live view is told while the tree grows (every member optional). A new sub-agent's own
 * fold is `agent.fold`: set its `observer` in `agent` to follow it.
 * @typedef {object} FoldObserver
 * @property {(turn: Turn) => void} [turnBegin]
 * @property {(turn: Turn, input: unknown) => void} [nestedInput]  a TurnBegin inside a turn
 * @property {(turn: Turn) => void} [turnEnd]
 * @property {(step: Step) => void} [stepBegin]
 * @property {(entry: Entry, step: Step) => void} [entry]  a new entry
 * @property {(entry: TextEntry | ThinkEntry, added: string) => void} [grow]  text or thinking added
 * @property {(entry: TextEntry | ThinkEntry) => void} [close]  the entry will not grow any more
 * @property {(tool: Tool) => void} [args]  its arguments grew
 * @property {(tool: Tool) => void} [status]  its status or result changed
 * @property {(agent: Agent, parent: Tool | null) => void} [agent]  a new sub-agent
 * @property {(payload: Payload) => void} [statusUpdate]
 */

/** The fold of one agent's events into turns. `push` them in order; `turns` is always current. */
export class Fold {
  /** @param {FoldObserver} [observer] */
  constructor(observer = {}) {
    this.observer = observer;
    /** @type {Turn[]} */
    this.turns = [];
    /** @type {Turn | null} */
    this.turn = null;
    /** @type {Step | null} */
    this.step = null;
    this.depth = 0;
    /** @type {Map<string, Tool>} */
    this.tools = new Map();
    /** @type {Tool | null} the latest tool call: a lone argument fragment belongs to it */
    this.lastTool = null;
    /** @type {Map<string, Tool>} approval request id → its tool call */
    this.approvals = new Map();
    /** @type {Map<string, Agent>} */
    this.agents = new Map();
    /** @type {TextEntry | ThinkEntry | null} the entry the open run grows */
    this.growing = null;
    this.now = 0;
    this.merger = new Merger(message => this.apply(message), {
      open: run => this.open(run),
      grow: (run, added) => this.grow(run, added),
    });
  }

  /** Fold one message that happened at `ts` (epoch seconds). */
  push(/** @type {Message} */ message, /** @type {number} */ ts) {
    this.now = ts;
    this.item = {ts, message};
    this.merger.push(message);
  }

  /** Close the open text run (the stream paused or ended). */
  flush() {
    this.merger.flush();
  }

  /** @param {Run} run */
  open(run) {
    const step = this.ensureStep();
    const item = this.current();
    if (run.kind === 'text' || run.kind === 'think') {
      step.events.push(item);
      /** @type {TextEntry | ThinkEntry} */
      const entry = run.kind === 'text'
        ? {kind: 'text', text: run.text, open: true}
        : {kind: 'think', text: run.text, encrypted: run.encrypted, open: true};
      this.growing = entry;
      this.addEntry(step, entry);
    } else if (run.kind === 'call') {
      const payload = run.head.payload || {};
      const given = payload.function?.arguments;
      this.addTool(step, str(payload.id), str(payload.function?.name) || 'tool', typeof given === 'string' ? given : null, null, item);
    } else this.fragment(run.text, item);
  }

  /** @param {Run} run @param {string} added */
  grow(run, added) {
    const entry = this.growing;
    const item = this.current();
    if (entry) {
      this.ensureStep().events.push(item);
      entry.text += added;
      if (entry.kind === 'think') entry.encrypted = run.encrypted;
      this.observer.grow?.(entry, added);
    } else this.fragment(added, item);
  }

  /** An argument fragment: it belongs to the latest tool call. @param {string} added @param {Item} item */
  fragment(added, item) {
    const tool = this.lastTool;
    if (!tool) { this.ensureStep().events.push(item); return; }
    tool.events.push(item);
    if (added) {
      tool.args = (tool.args ?? '') + added;
      this.observer.args?.(tool);
    }
  }

  /** A message the merge does not hold (an event, a media part, a merged run's result). */
  apply(/** @type {Message} */ message) {
    if (partKind(message)) {  // a run ended: its entry is complete
      const entry = this.growing;
      this.growing = null;
      if (entry) { entry.open = false; this.observer.close?.(entry); }
      return;
    }
    const item = this.current();
    const ts = item.ts;
    const payload = message.payload || {};
    if (message.blob) { this.reference(item, message.blob); return; }
    switch (message.type) {
      case 'TurnBegin':
        this.depth++;
        if (this.depth === 1 || !this.turn) {
          this.closeStep(ts);
          this.newTurn(payload.user_input ?? '', ts).events.push(item);
          this.observer.turnBegin?.(/** @type {Turn} */ (this.turn));
        } else {
          this.turn.events.push(item);
          this.observer.nestedInput?.(this.turn, payload.user_input);
        }
        return;
      case 'TurnEnd': {
        this.depth = Math.max(0, this.depth - 1);
        const turn = this.ensureTurn();
        turn.events.push(item);
        if (this.depth === 0) this.endTurn(turn, ts);
        return;
      }
      case 'StepBegin': {
        this.closeStep(ts);
        const turn = this.ensureTurn();
        /** @type {Step} */
        const step = this.newStep(typeof payload.n === 'number' ? payload.n : 0, ts);
        step.events.push(item);
        turn.steps.push(step);
        this.observer.stepBegin?.(step);
        return;
      }
      case 'StepRetry': {
        const step = this.ensureStep();
        step.retries++;
        step.events.push(item);
        this.addEntry(step, {kind: 'event', item});
        return;
      }
      case 'StepInterrupted': {
        const step = this.ensureStep();
        step.error = true;
        step.events.push(item);
        this.addEntry(step, {kind: 'event', item});
        return;
      }
      case 'StatusUpdate': {
        const step = this.ensureStep();
        step.events.push(item);
        if (payload.token_usage) {
          step.usage = addUsage(step.usage || {}, payload.token_usage);
          addUsage(this.ensureTurn().usage, payload.token_usage);
        }
        if (typeof payload.context_usage === 'number') step.context = payload.context_usage;
        this.observer.statusUpdate?.(payload);
        return;
      }
      case 'ToolResult': {
        const tool = this.tools.get(payload.tool_call_id);
        if (!tool) { this.ensureStep().events.push(item); return; }
        const value = payload.return_value || {};
        tool.events.push(item);
        tool.end = ts;
        tool.result = value;
        const why = value.message || '';
        // a call the turn's end (a cancel, a killed engine) cut short gets a result saying so
        tool.status = !value.is_error ? 'ok' : /rejected by the user/i.test(why) ? 'rejected'
          : why.startsWith('interrupted: ') ? 'interrupted' : 'error';
        this.observer.status?.(tool);
        return;
      }
      case 'ApprovalRequest': {
        const tool = this.tools.get(payload.tool_call_id);
        if (!tool) break;
        tool.events.push(item);
        this.approvals.set(payload.id, tool);
        if (tool.status === 'running') { tool.status = 'waiting'; this.observer.status?.(tool); }
        return;
      }
      case 'ApprovalResponse': {
        const tool = this.approvals.get(payload.request_id);
        if (!tool) return;  // its request is not in the history (answered as a killed turn was closed)
        tool.events.push(item);
        tool.approval = payload.response ?? null;
        if (tool.status === 'waiting') {
          tool.status = payload.response === 'reject' ? 'rejected' : 'running';
          this.observer.status?.(tool);
        }
        return;
      }
      case 'SubagentEvent': {
        this.subagent(payload, item);
        return;
      }
      default:
        break;
    }
    const step = this.ensureStep();
    step.events.push(item);
    this.addEntry(step, message.type === 'ContentPart' ? {kind: 'part', part: payload} : {kind: 'event', item});
  }

  /** A message that came by reference (its payload is too large to send at once). @param {Item} item @param {BlobRef} blob */
  reference(item, blob) {
    const preview = blob.preview || '';
    if (item.message.type === 'ToolCall') {
      const id = /"id":\s*"([^"]+)"/.exec(preview)?.[1];
      if (id) {
        this.addTool(this.ensureStep(), id, /"name":\s*"([^"]+)"/.exec(preview)?.[1] || 'tool', null, blob, item);
        return;
      }
    } else if (item.message.type === 'ToolResult') {
      const tool = this.tools.get(/"tool_call_id":\s*"([^"]+)"/.exec(preview)?.[1] || '');
      if (tool) {
        tool.events.push(item);
        tool.end = item.ts;
        tool.resultBlob = blob;
        tool.status = 'ok';
        this.observer.status?.(tool);
        return;
      }
    }
    const step = this.ensureStep();
    step.events.push(item);
    this.addEntry(step, {kind: 'event', item});
  }

  /** @param {Payload} payload @param {Item} item */
  subagent(payload, item) {
    const key = payload.agent_id || payload.parent_tool_call_id || '?';
    let agent = this.agents.get(key);
    if (!agent) {
      const parent = this.tools.get(payload.parent_tool_call_id) || this.lastTool;
      agent = {kind: 'agent', id: str(payload.agent_id), type: str(payload.subagent_type), start: item.ts, end: item.ts, fold: new Fold(), events: []};
      this.agents.set(key, agent);
      if (parent) parent.agents.push(agent);
      else {
        const step = this.ensureStep();
        step.tools.push(agent);
        this.addEntry(step, agent);
      }
      this.observer.agent?.(agent, parent);
    }
    agent.end = item.ts;
    agent.events.push(item);
    const event = payload.event;
    if (event && typeof event.type === 'string') agent.fold.push(event, item.ts);
  }

  /** @param {Step} step @param {string} id @param {string} name @param {string | null} args @param {BlobRef | null} argsBlob @param {Item} item */
  addTool(step, id, name, args, argsBlob, item) {
    /** @type {Tool} */
    const tool = {kind: 'tool', id, name, args, argsBlob, status: 'running', approval: null, result: null, resultBlob: null,
      start: item.ts, end: null, agents: [], events: [item]};
    step.tools.push(tool);
    this.tools.set(id, tool);
    this.lastTool = tool;
    this.addEntry(step, tool);
  }

  /** @param {Step} step @param {Entry} entry */
  addEntry(step, entry) {
    step.entries.push(entry);
    this.observer.entry?.(entry, step);
  }

  /** @param {Turn} turn @param {number} ts */
  endTurn(turn, ts) {
    this.closeStep(ts);
    turn.end = ts;
    for (const step of turn.steps) {
      for (const tool of step.tools) {
        if (tool.kind === 'tool' && (tool.status === 'running' || tool.status === 'waiting')) {
          tool.status = 'interrupted';
          tool.end = ts;
          this.observer.status?.(tool);
        }
      }
    }
    this.turn = null;
    this.step = null;
    this.observer.turnEnd?.(turn);
  }

  /** @returns {Item} */
  current() {
    return this.item || {ts: this.now, message: {type: ''}};
  }

  /** @param {unknown} input @param {number} ts */
  newTurn(input, ts) {
    /** @type {Turn} */
    const turn = {kind: 'turn', input, start: ts, end: null, steps: [], events: [], usage: {}};
    this.turns.push(turn);
    this.turn = turn;
    this.step = null;
    return turn;
  }

  /** @param {number} n @param {number} ts @returns {Step} */
  newStep(n, ts) {
    const step = {kind: /** @type {const} */ ('step'), n, start: ts, end: null, entries: [], tools: [], retries: 0, error: false, usage: null, context: null, events: []};
    this.step = step;
    return step;
  }

  ensureTurn() {
    return this.turn || this.newTurn(null, this.now);
  }

  ensureStep() {
    if (this.step) return this.step;
    const turn = this.ensureTurn();
    const step = this.newStep(0, this.now);
    turn.steps.push(step);
    return step;
  }

  /** @param {number} ts */
  closeStep(ts) {
    if (this.step && this.step.end === null) this.step.end = ts;
  }
}

/** The fold of a finished list of items. */
export function foldItems(/** @type {Iterable<Item>} */ items) {
  const tree = new Fold();
  for (const {ts, message} of items) tree.push(message, ts);
  tree.flush();
  return tree;
}

/** Token usage of a turn, a step or a sub-agent with everything inside it (sub-agents included). */
export function usageWithin(/** @type {Turn | Step | Agent} */ node) {
  /** @type {Usage} */
  const sum = {};
  if (node.kind === 'agent') {
    for (const turn of node.fold.turns) addUsage(sum, usageWithin(turn));
    return sum;
  }
  const steps = node.kind === 'turn' ? node.steps : [node];
  for (const step of steps) {
    addUsage(sum, step.usage);
    for (const tool of step.tools) {
      for (const agent of tool.kind === 'agent' ? [tool] : tool.agents) addUsage(sum, usageWithin(agent));
    }
  }
  return sum;
}
