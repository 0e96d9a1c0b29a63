// @ts-check
// The trace view (`soulwire vis`): a session's recorded events, folded by fold.js into a
// timeline of turns, steps, tool calls, retries and sub-agents with their durations, tokens and
// context use; the raw JSON of anything selected; every event in order; export as Markdown or JSON.

import {el, clear, fmtDuration, fmtTokens, fmtTime, inputText, download, toast, probe} from './util.js';
import {sessions, web} from './api.js';
import {addUsage, foldItems, usageTotal, usageWithin} from './fold.js';

/** @typedef {import('./fold.js').Turn} Turn */
/** @typedef {import('./fold.js').Step} Step */
/** @typedef {import('./fold.js').Tool} Tool */
/** @typedef {import('./fold.js').Agent} Agent */
/** @typedef {import('./fold.js').Usage} Usage */
/** @typedef {import('./fold.js').Message} Message */
/** @typedef {Turn | Step | Tool | Agent} Node */
/** @typedef {{node: Node, depth: number, label: string}} Row */
/** @typedef {{timestamp: number, message: Message}} SessionRecord  a record of `GET /api/sessions/{id}/records` */
/** @typedef {{input: number, output: number, cache_read: number, cache_write: number}} Price  USD per million tokens */

const MAX_RECORD_BYTES = 65536;  // larger records come by reference; their payload loads on demand

/** USD for `usage` at `price` (USD per million tokens, as `GET /api/models` and the session's
 * info give it from the SDK's price table): the same sum as `ModelPrice.cost`.
 * @param {Usage | null | undefined} usage @param {Price | null | undefined} price */
export function costOf(usage, price) {
  if (!price || !usage) return null;
  return ((usage.input_other || 0) * price.input + (usage.output || 0) * price.output
    + (usage.input_cache_read || 0) * price.cache_read + (usage.input_cache_creation || 0) * price.cache_write) / 1e6;
}

/** @param {number | null | undefined} usd */
export function fmtCost(usd) {
  if (usd === null || usd === undefined) return '';
  return `$${usd >= 1 ? usd.toFixed(2) : usd >= 0.01 ? usd.toFixed(4) : usd.toFixed(6)}`;
}

/** `1 turn`, `2 turns`. @param {number} n @param {string} noun */
const count = (n, noun) => `${n} ${noun}${n === 1 ? '' : 's'}`;

/** @param {Turn} turn */
const turnLabel = turn => turn.input === null ? '(no prompt)' : inputText(turn.input) || '(empty prompt)';

/** @param {Step} step */
function stepLabel(step) {
  const label = step.n ? `step ${step.n}` : 'step';
  return step.retries ? `${label} (retried ×${step.retries})` : label;
}

/** @param {Agent} agent */
const agentLabel = agent => `sub-agent ${agent.type} ${agent.id}`.trim();

/** The timeline's rows: every turn, step, tool call and sub-agent, depth first.
 * @param {Turn[]} turns @param {number} depth @param {Row[]} out */
function rowsOf(turns, depth, out) {
  turns.forEach((turn, i) => {
    out.push({node: turn, depth, label: depth === 0 ? `Turn ${i + 1}: ${turnLabel(turn)}` : `turn: ${turnLabel(turn)}`});
    for (const step of turn.steps) {
      out.push({node: step, depth: depth + 1, label: stepLabel(step)});
      for (const tool of step.tools) {
        if (tool.kind === 'agent') { pushAgent(tool, depth + 2, out); continue; }
        out.push({node: tool, depth: depth + 2, label: `${tool.name} ${summary(tool.args)}`});
        for (const agent of tool.agents) pushAgent(agent, depth + 3, out);
      }
    }
  });
  return out;
}

/** @param {Agent} agent @param {number} depth @param {Row[]} out */
function pushAgent(agent, depth, out) {
  out.push({node: agent, depth, label: agentLabel(agent)});
  rowsOf(agent.fold.turns, depth + 1, out);
}

/** @param {string | null} args */
function summary(args) {
  try {
    const parsed = JSON.parse(args || '{}');
    const value = parsed.command || parsed.path || parsed.pattern || parsed.url || parsed.description || parsed.query || '';
    return typeof value === 'string' ? value.slice(0, 80) : '';
  } catch { return ''; }
}

/** The session as Markdown: each turn's prompt, the assistant's text, tool calls and results.
 * @param {string} title @param {SessionRecord[]} records */
export function toMarkdown(title, records) {
  const lines = [`# ${title}`, ''];
  /** @param {string} text @param {string} prefix */
  const quote = (text, prefix) => lines.push(...text.split('\n').map(l => `${prefix}${l}`), '');
  const tree = foldItems(records.map(r => ({ts: r.timestamp, message: r.message})));
  tree.turns.forEach((turn, i) => {
    lines.push(`## Turn ${i + 1}`, '');
    if (turn.input !== null) quote(inputText(turn.input), '> ');
    for (const step of turn.steps) {
      for (const entry of step.entries) {
        if (entry.kind === 'text' && entry.text.trim()) lines.push(entry.text.trim(), '');
        else if (entry.kind === 'event' && entry.item.message.type === 'SteerInput') {
          quote(inputText(entry.item.message.payload?.user_input), '> (steer) ');
        } else if (entry.kind === 'tool') {
          lines.push(`**${entry.name}** \`${(entry.args || '').replace(/`/g, "'")}\``, '');
          const rv = entry.result;
          if (!rv) continue;
          const out = typeof rv.output === 'string' ? rv.output : (rv.output || []).map((/** @type {{text?: string}} */ x) => x.text || '').join('');
          lines.push(`→ ${entry.name} ${rv.is_error ? `error: ${rv.message}` : 'ok'}`, '');
          if (out) lines.push('```', out.length > 4000 ? `${out.slice(0, 4000)}\n… (${out.length} characters)` : out, '```', '');
        }
      }
    }
  });
  return lines.join('\n');
}

export class TraceView {
  /** The list of sessions to trace. @param {HTMLElement} main */
  static picker(main) {
    const list = el('ul', {class: 'trace-picker'});
    clear(main).append(el('div', {class: 'page'}, el('div', {class: 'card'}, el('h1', {text: 'Trace a session'}), list)));
    sessions.list().then((/** @type {{id: string, title?: string, updated?: number, turns: number}[]} */ items) => {
      if (!items.length) list.append(el('li', {class: 'muted', text: 'No sessions yet.'}));
      for (const s of items) list.append(el('li', null, el('a', {href: `#/trace/${s.id}`, text: s.title || s.id}), el('span', {class: 'muted', text: ` · ${fmtTime(s.updated)} · ${count(s.turns, 'turn')}`})));
    }).catch((/** @type {Error} */ err) => list.append(el('li', {text: err.message})));
    return {destroy() {}};
  }

  /** @param {HTMLElement} main @param {string} id */
  constructor(main, id) {
    this.id = id;
    /** @type {Record<string, any> | null} the session's info */
    this.info = null;
    /** @type {SessionRecord[]} */
    this.records = [];
    /** @type {Turn[]} */
    this.turns = [];
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

  /** @param {'timeline' | 'events'} which */
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
    } catch (error) {
      const err = /** @type {import('./api.js').ApiError} */ (error);
      clear(this.timeline).append(el('div', {class: 'card error', text: err.status === 404 ? `There is no session ${this.id}.` : err.message}));
      return;
    }
    this.info = info;
    this.records = data.records;
    this.title.textContent = `Trace · ${info.title || info.id}`;
    document.title = `Trace · ${info.title || 'session'} · Soulwire`;
    this.turns = foldItems(this.records.map(r => ({ts: r.timestamp, message: r.message}))).turns;
    this.render();
    clear(this.eventsBox);
    if (!this.eventsBox.hidden) this.renderEvents();
    probe.__soulwireTraceMs = performance.now() - started;
    probe.__soulwireTraceReady = performance.now();
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
    const contexts = rows.flatMap(r => r.node.kind === 'step' && r.node.context !== null ? [r.node.context] : []);
    const price = this.info?.price || null;
    const total = this.turns.reduce((sum, t) => addUsage(sum, usageWithin(t)), /** @type {Usage} */ ({}));
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
      const usage = n.kind === 'step' ? n.usage : n.kind === 'turn' || n.kind === 'agent' ? usageWithin(n) : null;
      const tokensHere = usageTotal(usage);
      if (tokensHere) facts.push(`${fmtTokens(tokensHere)} tok`);
      const costHere = price && tokensHere ? fmtCost(costOf(usage, price)) : '';
      if (n.kind === 'step' && n.context !== null) facts.push(`ctx ${(n.context * 100).toFixed(1)}%`);
      const status = n.kind === 'tool' ? n.status : null;
      if (status && status !== 'ok') facts.push(status);
      const error = n.kind === 'step' && n.error;
      const item = el('div', {class: `trace-row kind-${n.kind} ${status ? `is-${status}` : ''} ${error ? 'is-error' : ''}`, role: 'treeitem', tabindex: i === 0 ? '0' : '-1', 'aria-level': String(row.depth + 1)},
        el('span', {class: 'trace-label', text: row.label, title: row.label}),
        el('span', {class: 'trace-facts', text: facts.filter(Boolean).join(' · ')}),
        costHere ? el('span', {class: 'trace-cost-cell', text: costHere}) : null,  // (the track keeps its column without it)
        el('span', {class: 'trace-track'}, bar));
      /** @type {HTMLElement} */ (item.firstChild).style.paddingLeft = `${row.depth * 1.1}rem`;  // only the label is indented: the columns line up
      item.addEventListener('click', () => this.select(item, n));
      item.addEventListener('keydown', event => this.rowKey(event, item, n));
      fragment.append(item);
    });
    clear(this.timeline).append(fragment);
    if (!rows.length) this.timeline.append(el('div', {class: 'muted', text: 'No turns recorded yet.'}));
  }

  /** @param {HTMLElement} item @param {Node} node */
  select(item, node) {
    for (const r of this.timeline.querySelectorAll('.selected')) r.classList.remove('selected');
    item.classList.add('selected');
    this.showJSON(node.events.map(e => ({timestamp: e.ts, message: e.message})), true);
  }

  /** Records as raw JSON; a payload that came by reference (a large output) loads on demand.
   * @param {SessionRecord[]} records @param {boolean} flat */
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
        } catch (err) { toast(`Cannot load: ${/** @type {Error} */ (err).message}`, 'error'); }
      });
      this.detailActions.append(button);
    }
  }

  /** @param {KeyboardEvent} event @param {HTMLElement} item @param {Node} node */
  rowKey(event, item, node) {
    /** @param {Element | null} target */
    const move = target => {
      if (target instanceof HTMLElement) { item.tabIndex = -1; target.tabIndex = 0; target.focus(); }
    };
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

  /** @param {'md' | 'json'} kind */
  async export(kind) {
    if (!this.info) return;
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
