// The trace view (`soulwire vis`): a session's recorded events folded into a timeline of turns,
// steps, tool calls, retries and sub-agents with their durations, tokens and context use; the
// raw JSON of anything selected; every event in order; export as Markdown or JSON.

import {el, clear, fmtDuration, fmtTokens, fmtTime, inputText, download, toast} from './util.js';
import {sessions, web} from './api.js';

const MAX_RECORD_BYTES = 65536;  // larger records come by reference; their payload loads on demand

function usageTotal(u) {
  return u ? (u.input_other || 0) + (u.output || 0) + (u.input_cache_read || 0) + (u.input_cache_creation || 0) : 0;
}

const USAGE_KEYS = ['input_other', 'output', 'input_cache_read', 'input_cache_creation'];

function addUsage(into, u) {
  for (const key of USAGE_KEYS) into[key] = (into[key] || 0) + (u?.[key] || 0);
  return into;
}

/** USD for `usage` at `price` (USD per million tokens, as `GET /api/models` and the session's
 * info give it from the SDK's price table): the same sum as `ModelPrice.cost`. */
export function costOf(usage, price) {
  if (!price || !usage) return null;
  return ((usage.input_other || 0) * price.input + (usage.output || 0) * price.output
    + (usage.input_cache_read || 0) * price.cache_read + (usage.input_cache_creation || 0) * price.cache_write) / 1e6;
}

export function fmtCost(usd) {
  if (usd === null || usd === undefined) return '';
  return `$${usd >= 1 ? usd.toFixed(2) : usd >= 0.01 ? usd.toFixed(4) : usd.toFixed(6)}`;
}

/** `1 turn`, `2 turns`. */
const count = (n, noun) => `${n} ${noun}${n === 1 ? '' : 's'}`;

/** Token usage of a node and everything inside it (a turn's sub-agents included). */
function usageOf(node) {
  if (node.usageAll) return node.usageAll;
  const sum = node.usageAll = addUsage({}, node.usageSum);
  const visit = n => {
    if (n.kind === 'agent') for (const t of n.turns) addUsage(sum, usageOf(t));
    else for (const a of n.agents || []) visit(a);
  };
  for (const step of node.steps || []) for (const tool of step.tools) visit(tool);
  for (const tool of node.tools || []) visit(tool);
  if (node.kind === 'agent') for (const t of node.turns) addUsage(sum, usageOf(t));
  return sum;
}

/** Fold `[{ts, message}]` into turns → steps → tool calls (→ sub-agents, folded the same way). */
export function fold(items) {
  const turns = [];
  let turn = null, step = null, depth = 0;
  const tools = new Map();
  const agents = new Map();
  const ensureTurn = (ts) => {
    if (!turn) { turn = {kind: 'turn', label: '(no prompt)', start: ts, end: null, steps: [], events: [], tokens: 0}; turns.push(turn); }
    return turn;
  };
  const ensureStep = (ts) => {
    ensureTurn(ts);
    if (!step) { step = {kind: 'step', label: 'step', n: 0, start: ts, end: null, tools: [], retries: 0, events: [], tokens: 0}; turn.steps.push(step); }
    return step;
  };
  const closeStep = (ts) => { if (step && step.end === null) step.end = ts; };
  for (const item of items) {
    const {ts, message} = item;
    const payload = message.payload || {};
    switch (message.type) {
      case 'TurnBegin':
        depth++;
        if (depth === 1) {
          closeStep(ts);
          turn = {kind: 'turn', label: inputText(payload.user_input) || '(empty prompt)', start: ts, end: null, steps: [], events: [], tokens: 0};
          turns.push(turn);
          step = null;
        }
        turn.events.push(item);
        continue;
      case 'TurnEnd':
        depth = Math.max(0, depth - 1);
        ensureTurn(ts).events.push(item);
        if (depth === 0) { closeStep(ts); turn.end = ts; for (const t of turn.steps.flatMap(s => s.tools)) if (t.end === null) { t.end = ts; t.status = 'interrupted'; } turn = null; step = null; }
        continue;
      case 'StepBegin':
        closeStep(ts);
        ensureTurn(ts);
        step = {kind: 'step', label: `step ${payload.n}`, n: payload.n, start: ts, end: null, tools: [], retries: 0, events: [item], tokens: 0};
        turn.steps.push(step);
        continue;
      case 'StepRetry':
        ensureStep(ts).retries++;
        step.events.push(item);
        step.label = `step ${step.n} (retried ×${step.retries})`;
        continue;
      case 'StepInterrupted':
        ensureStep(ts).events.push(item);
        step.error = true;
        continue;
      case 'StatusUpdate': {
        const s = ensureStep(ts);
        s.events.push(item);
        if (payload.token_usage) {
          s.tokens += usageTotal(payload.token_usage);
          s.usage = payload.token_usage;
          s.usageSum = addUsage(s.usageSum || {}, payload.token_usage);
          turn.tokens += usageTotal(payload.token_usage);
          turn.usageSum = addUsage(turn.usageSum || {}, payload.token_usage);
        }
        if (typeof payload.context_usage === 'number') s.context = payload.context_usage;
        continue;
      }
      case 'ToolCall': {
        const s = ensureStep(ts);
        const tool = {kind: 'tool', id: payload.id, label: payload.function?.name || 'tool', args: payload.function?.arguments || '', start: ts, end: null, status: 'running', events: [item], agents: []};
        s.tools.push(tool);
        tools.set(payload.id, tool);
        continue;
      }
      case 'ToolCallPart': {
        const s = ensureStep(ts);
        const tool = s.tools[s.tools.length - 1];
        if (tool) { tool.args += payload.arguments_part || ''; tool.events.push(item); }
        continue;
      }
      case 'ToolResult': {
        const tool = tools.get(payload.tool_call_id);
        if (tool) {
          tool.end = ts;
          const rv = payload.return_value || {};
          tool.status = rv.is_error ? (/rejected/i.test(rv.message || '') ? 'rejected' : 'error') : 'ok';
          tool.events.push(item);
        } else ensureStep(ts).events.push(item);
        continue;
      }
      case 'ApprovalResponse': case 'ApprovalRequest': {
        const tool = message.type === 'ApprovalRequest' ? tools.get(payload.tool_call_id) : null;
        (tool || ensureStep(ts)).events.push(item);
        continue;
      }
      case 'SubagentEvent': {
        const parent = tools.get(payload.parent_tool_call_id);
        const key = payload.agent_id || payload.parent_tool_call_id || '?';
        let agent = agents.get(key);
        if (!agent) {
          agent = {kind: 'agent', label: `sub-agent ${payload.subagent_type || ''} ${payload.agent_id || ''}`.trim(), start: ts, end: ts, items: [], events: []};
          agents.set(key, agent);
          (parent ? parent.agents : ensureStep(ts).tools).push(agent);
        }
        agent.end = ts;
        agent.items.push({ts, message: payload.event || {}});
        agent.events.push(item);
        continue;
      }
      default:
        (step || turn ? ensureStep(ts) : ensureTurn(ts)).events.push(item);
    }
  }
  for (const agent of agents.values()) {
    agent.turns = fold(agent.items);
    agent.tokens = agent.turns.reduce((n, t) => n + t.tokens, 0);
  }
  return turns;
}

function rowsOf(turns, depth, out) {
  turns.forEach((turn, i) => {
    out.push({node: turn, depth, label: depth === 0 ? `Turn ${i + 1}: ${turn.label}` : `turn: ${turn.label}`});
    for (const step of turn.steps) {
      out.push({node: step, depth: depth + 1, label: step.label});
      for (const tool of step.tools) {
        if (tool.kind === 'agent') { pushAgent(tool, depth + 2, out); continue; }
        out.push({node: tool, depth: depth + 2, label: `${tool.label} ${summary(tool.args)}`});
        for (const agent of tool.agents) pushAgent(agent, depth + 3, out);
      }
    }
  });
  return out;
}

function pushAgent(agent, depth, out) {
  out.push({node: agent, depth, label: agent.label});
  rowsOf(agent.turns, depth + 1, out);
}

function summary(args) {
  try {
    const parsed = JSON.parse(args || '{}');
    const value = parsed.command || parsed.path || parsed.pattern || parsed.url || parsed.description || parsed.query || '';
    return typeof value === 'string' ? value.slice(0, 80) : '';
  } catch { return ''; }
}

export function toMarkdown(title, records) {
  const lines = [`# ${title}`, ''];
  let text = '';
  const flush = () => { if (text.trim()) lines.push(text.trim(), ''); text = ''; };
  const tools = new Map();
  let turnNo = 0;
  let depth = 0;
  for (const {message} of records) {
    const p = message.payload || {};
    switch (message.type) {
      case 'TurnBegin':
        flush();
        if (depth++ === 0) lines.push(`## Turn ${++turnNo}`, '', ...inputText(p.user_input).split('\n').map(l => `> ${l}`), '');
        break;
      case 'TurnEnd': flush(); depth = Math.max(0, depth - 1); break;
      case 'SteerInput': flush(); lines.push(...inputText(p.user_input).split('\n').map(l => `> (steer) ${l}`), ''); break;
      case 'ContentPart': if (p.type === 'text') text += p.text; break;
      case 'ToolCall': flush(); tools.set(p.id, p.function?.name || 'tool'); lines.push(`**${p.function?.name}** \`${(p.function?.arguments || '').replace(/`/g, "'")}\``, ''); break;
      case 'ToolResult': {
        const rv = p.return_value || {};
        const out = typeof rv.output === 'string' ? rv.output : (rv.output || []).map(x => x.text || '').join('');
        lines.push(`→ ${tools.get(p.tool_call_id) || 'tool'} ${rv.is_error ? `error: ${rv.message}` : 'ok'}`, '');
        if (out) lines.push('```', out.length > 4000 ? `${out.slice(0, 4000)}\n… (${out.length} characters)` : out, '```', '');
        break;
      }
      default: break;
    }
  }
  flush();
  return lines.join('\n');
}

export class TraceView {
  static picker(main) {
    const list = el('ul', {class: 'trace-picker'});
    clear(main).append(el('div', {class: 'page'}, el('div', {class: 'card'}, el('h1', {text: 'Trace a session'}), list)));
    sessions.list().then(items => {
      if (!items.length) list.append(el('li', {class: 'muted', text: 'No sessions yet.'}));
      for (const s of items) list.append(el('li', null, el('a', {href: `#/trace/${s.id}`, text: s.title || s.id}), el('span', {class: 'muted', text: ` · ${fmtTime(s.updated)} · ${count(s.turns, 'turn')}`})));
    }).catch(err => list.append(el('li', {text: err.message})));
    return {destroy() {}};
  }

  constructor(main, id) {
    this.id = id;
    this.detail = el('pre', {class: 'trace-json', tabindex: '0', 'aria-label': 'Raw JSON', text: 'Select a row or an event to see its raw JSON.'});
    this.detailActions = el('div', {class: 'trace-json-actions'});
    this.timeline = el('div', {class: 'trace-rows', role: 'tree', 'aria-label': 'Timeline'});
    this.summary = el('div', {class: 'trace-summary'});
    this.eventsBox = el('div', {class: 'trace-events', hidden: true});
    this.tabTimeline = el('button', {type: 'button', role: 'tab', 'aria-selected': 'true', text: 'Timeline', onclick: () => this.tab('timeline')});
    this.tabEvents = el('button', {type: 'button', role: 'tab', 'aria-selected': 'false', text: 'Events', onclick: () => this.tab('events')});
    this.title = el('h1', {text: 'Trace'});
    const head = el('div', {class: 'session-head'},
      el('div', {class: 'session-heading'}, this.title, this.summary),
      el('div', {class: 'session-actions'},
        el('a', {class: 'button', href: `#/s/${id}`, text: 'Open session'}),
        el('button', {type: 'button', onclick: () => this.load(), text: 'Refresh'}),
        el('button', {type: 'button', onclick: () => this.export('md'), text: 'Export Markdown'}),
        el('button', {type: 'button', onclick: () => this.export('json'), text: 'Export JSON'})));
    clear(main).append(el('div', {class: 'trace-view'}, head,
      el('div', {class: 'tabs', role: 'tablist'}, this.tabTimeline, this.tabEvents),
      el('div', {class: 'trace-body'}, el('div', {class: 'trace-left'}, this.timeline, this.eventsBox),
        el('div', {class: 'trace-right'}, this.detailActions, this.detail))));
    this.load();
  }

  destroy() {}

  tab(which) {
    const events = which === 'events';
    this.timeline.hidden = events;
    this.eventsBox.hidden = !events;
    this.tabTimeline.setAttribute('aria-selected', String(!events));
    this.tabEvents.setAttribute('aria-selected', String(events));
    if (events && !this.eventsBox.firstChild) this.renderEvents();
  }

  async load() {
    const started = performance.now();
    let info, data;
    try {
      [info, data] = await Promise.all([sessions.get(this.id), sessions.records(this.id, 0, 1000000, MAX_RECORD_BYTES)]);
    } catch (err) {
      clear(this.timeline).append(el('div', {class: 'card error', text: err.status === 404 ? `There is no session ${this.id}.` : err.message}));
      return;
    }
    this.info = info;
    this.records = data.records;
    this.title.textContent = `Trace · ${info.title || info.id}`;
    document.title = `Trace · ${info.title || 'session'} · Soulwire`;
    this.turns = fold(this.records.map(r => ({ts: r.timestamp, message: r.message})));
    this.render();
    clear(this.eventsBox);
    if (!this.eventsBox.hidden) this.renderEvents();
    window.__soulwireTraceMs = performance.now() - started;
    window.__soulwireTraceReady = performance.now();
    document.body.dataset.traceReady = String(this.records.length);
  }

  render() {
    const rows = rowsOf(this.turns, 0, []);
    const times = this.records.map(r => r.timestamp).filter(Boolean);
    const t0 = times.length ? times[0] : 0;
    const t1 = times.length ? times[times.length - 1] : 0;
    const span = Math.max(0.001, t1 - t0);
    const steps = rows.filter(r => r.node.kind === 'step').length;
    const tools = rows.filter(r => r.node.kind === 'tool').length;
    const agents = rows.filter(r => r.node.kind === 'agent').length;
    const contexts = rows.map(r => r.node.context).filter(c => typeof c === 'number');
    const price = this.info?.price || null;
    const total = this.turns.reduce((sum, t) => addUsage(sum, usageOf(t)), {});
    const tokens = usageTotal(total);  // sub-agents included
    const model = this.info?.model_name || this.info?.model || 'its model';
    const cost = price
      ? el('span', {class: 'trace-cost', title: `${model}: $${price.input} in / $${price.output} out / $${price.cache_read} cached, per million tokens`, text: ` · ${fmtCost(costOf(total, price))} in all`})
      : el('span', {class: 'cost-unknown', text: ` · cost unknown (no price for ${model})`});
    clear(this.summary).append(`${count(this.turns.length, 'turn')} · ${count(steps, 'step')} · ${count(tools, 'tool call')} · ${count(agents, 'sub-agent')} · ${fmtTokens(tokens)} tokens`,
      cost, contexts.length ? ` · context up to ${(Math.max(...contexts) * 100).toFixed(1)}%` : '', ` · ${fmtDuration(span)} · ${this.records.length} events`);
    const fragment = document.createDocumentFragment();
    rows.forEach((row, i) => {
      const n = row.node;
      const start = n.start ?? t0;
      const end = n.end ?? start;
      const bar = el('span', {class: `bar bar-${n.kind}`});
      bar.style.marginLeft = `${((start - t0) / span) * 100}%`;
      bar.style.width = `${Math.max(0.4, ((end - start) / span) * 100)}%`;
      const facts = [fmtDuration(end - start)];
      // A turn's and a sub-agent's tokens and cost include the sub-agents inside them.
      const usage = n.kind === 'step' ? n.usageSum : n.kind === 'turn' || n.kind === 'agent' ? usageOf(n) : null;
      const tokensHere = usage ? usageTotal(usage) : n.tokens;
      if (tokensHere) facts.push(`${fmtTokens(tokensHere)} tok`);
      const cost = price && usage && usageTotal(usage) ? fmtCost(costOf(usage, price)) : '';
      if (typeof n.context === 'number') facts.push(`ctx ${(n.context * 100).toFixed(1)}%`);
      if (n.status && n.status !== 'ok') facts.push(n.status);
      const item = el('div', {class: `trace-row kind-${n.kind} ${n.status ? `is-${n.status}` : ''} ${n.error ? 'is-error' : ''}`, role: 'treeitem', tabindex: i === 0 ? '0' : '-1', 'aria-level': String(row.depth + 1)},
        el('span', {class: 'trace-label', text: row.label, title: row.label}),
        el('span', {class: 'trace-facts', text: facts.filter(Boolean).join(' · ')}),
        cost ? el('span', {class: 'trace-cost-cell', text: cost}) : null,  // (the track keeps its column without it)
        el('span', {class: 'trace-track'}, bar));
      item.firstChild.style.paddingLeft = `${row.depth * 1.1}rem`;  // only the label is indented: the columns line up
      item.addEventListener('click', () => this.select(item, n));
      item.addEventListener('keydown', event => this.rowKey(event, item, n));
      fragment.append(item);
    });
    clear(this.timeline).append(fragment);
    if (!rows.length) this.timeline.append(el('div', {class: 'muted', text: 'No turns recorded yet.'}));
  }

  select(item, node) {
    for (const r of this.timeline.querySelectorAll('.selected')) r.classList.remove('selected');
    item.classList.add('selected');
    this.showJSON((node.events || []).map(e => ({timestamp: e.ts, message: e.message})), true);
  }

  /** Records as raw JSON; a payload that came by reference (a large output) loads on demand. */
  showJSON(records, flat) {
    const render = () => {
      const shown = records.map(r => flat ? {timestamp: r.timestamp, ...r.message} : r);
      this.detail.textContent = JSON.stringify(flat ? shown : shown[0], null, 2);
    };
    render();
    clear(this.detailActions);
    for (const record of records) {
      const blob = record.message.blob;
      if (!blob) continue;
      const button = el('button', {type: 'button', class: 'link', text: `Load the whole ${record.message.type} payload (${blob.size.toLocaleString()} bytes)`});
      button.addEventListener('click', async () => {
        try {
          record.message.payload = await web.blob(blob.blob_id);
          delete record.message.blob;
          button.remove();
          render();
        } catch (err) { toast(`Cannot load: ${err.message}`, 'error'); }
      });
      this.detailActions.append(button);
    }
  }

  rowKey(event, item, node) {
    const move = target => { if (target) { item.tabIndex = -1; target.tabIndex = 0; target.focus(); } };
    if (event.key === 'ArrowDown') { event.preventDefault(); move(item.nextElementSibling); }
    else if (event.key === 'ArrowUp') { event.preventDefault(); move(item.previousElementSibling); }
    else if (event.key === 'Enter' || event.key === ' ') { event.preventDefault(); this.select(item, node); }
  }

  renderEvents() {
    const box = this.eventsBox;
    clear(box);
    const table = el('div', {class: 'event-list', role: 'list'});
    box.append(table);
    const t0 = this.records[0]?.timestamp || 0;
    let i = 0;
    const chunk = () => {
      const fragment = document.createDocumentFragment();
      const end = Math.min(this.records.length, i + 500);
      for (; i < end; i++) {
        const record = this.records[i];
        const index = i;
        const p = record.message.payload || {};
        const hint = record.message.type === 'ContentPart' ? (p.text || p.think || '').slice(0, 60)
          : record.message.type === 'SubagentEvent' ? p.event?.type : '';
        const row = el('button', {type: 'button', class: 'event-row', role: 'listitem'},
          el('span', {class: 'ev-n', text: String(index)}),
          el('span', {class: 'ev-t', text: `+${((record.timestamp || t0) - t0).toFixed(3)}s`}),
          el('span', {class: 'ev-type', text: record.message.type}),
          el('span', {class: 'ev-hint', text: hint || ''}));
        row.addEventListener('click', () => this.showJSON([record], false));
        fragment.append(row);
      }
      table.append(fragment);
      if (i < this.records.length) requestAnimationFrame(chunk);
    };
    chunk();
  }

  async export(kind) {
    if (!this.records) return;
    const base = `soulwire-${this.id.slice(0, 8)}`;
    // The whole record, large payloads included (the timeline holds some by reference only).
    const records = this.records.some(r => r.message.blob) ? (await sessions.records(this.id)).records : this.records;
    if (kind === 'json') {
      download(`${base}.json`, JSON.stringify({session: this.info, records}, null, 2), 'application/json');
    } else {
      download(`${base}.md`, toMarkdown(this.info.title || this.id, records), 'text/markdown');
    }
    toast(`Exported ${kind === 'json' ? 'JSON' : 'Markdown'}`, 'info', 1500);
  }
}
