// The web UI's fold (static/js/fold.js), checked against the Python fold through the shared
// vectors (fold_vectors.json, written by tests/unit/test_fold_vectors.py) and on the session tree
// it builds. Run with `npm test` (node --test).

import {test} from 'node:test';
import assert from 'node:assert/strict';
import {readFileSync} from 'node:fs';

import {Fold, assemble, fold, foldItems, usageTotal, usageWithin} from '../../src/soulwire/server/static/js/fold.js';

/** @type {{vectors: {name: string, events: any[], fold: any[], assemble: {parts: any[], calls: any[]}}[]}} */
const {vectors} = JSON.parse(readFileSync(new URL('./fold_vectors.json', import.meta.url), 'utf8'));
const items = (/** @type {any[]} */ events) => events.map((message, i) => ({ts: 100 + i, message}));

/** The tree's entries in order, sub-agents' left out, as the Python `assemble` spells them. */
function assembledFromTree(/** @type {Fold} */ tree) {
  const parts = [];
  const calls = [];
  for (const turn of tree.turns) {
    for (const step of turn.steps) {
      for (const entry of step.entries) {
        if (entry.kind === 'text') parts.push({type: 'text', text: entry.text});
        else if (entry.kind === 'think') parts.push({type: 'think', think: entry.text, encrypted: entry.encrypted});
        else if (entry.kind === 'part') parts.push(entry.part);
        else if (entry.kind === 'tool') calls.push({id: entry.id, name: entry.name, arguments: entry.args});
      }
    }
  }
  return {parts, calls};
}

test('the vectors cover every kind of run', () => {
  assert.ok(vectors.length >= 10);
});

for (const vector of vectors) {
  test(`fold: ${vector.name}`, () => {
    assert.deepEqual(fold(vector.events), vector.fold);
  });

  test(`assemble: ${vector.name}`, () => {
    assert.deepEqual(assemble(vector.events), vector.assemble);
  });

  test(`the session tree holds what assemble does: ${vector.name}`, () => {
    const expected = {
      parts: vector.assemble.parts,
      calls: vector.assemble.calls.map(c => ({id: c.id, name: c.function.name, arguments: c.function.arguments})),
    };
    assert.deepEqual(assembledFromTree(foldItems(items(vector.events))), expected);
  });

  test(`live, the growth a view is told adds up to the tree: ${vector.name}`, () => {
    const seen = new Map();
    const tree = new Fold({
      entry: entry => { if (entry.kind === 'text' || entry.kind === 'think') seen.set(entry, entry.text); },
      grow: (entry, added) => seen.set(entry, seen.get(entry) + added),
    });
    for (const {ts, message} of items(vector.events)) tree.push(message, ts);
    tree.flush();
    for (const [entry, text] of seen) {
      assert.equal(text, entry.text);
      assert.equal(entry.open, false);
    }
  });
}

const byName = (/** @type {string} */ name) => {
  const vector = vectors.find(v => v.name === name);
  assert.ok(vector, name);
  return foldItems(items(vector.events));
};

test('a turn: its steps, usage, retries, an approved and finished tool call', () => {
  const tree = byName('a whole turn with a tool, an approval, a retry and two steps');
  assert.equal(tree.turns.length, 1);
  const [turn] = tree.turns;
  assert.equal(turn.input, 'do it');
  assert.deepEqual(turn.steps.map(s => s.n), [1, 2]);
  assert.equal(turn.start, 100);
  assert.equal(turn.end, 100 + vectors.find(v => v.name.startsWith('a whole turn'))?.events.length - 1);
  const [first, second] = turn.steps;
  assert.equal(first.end, second.start);
  assert.deepEqual(first.usage, {input_other: 100, output: 20, input_cache_read: 0, input_cache_creation: 0});
  assert.equal(first.context, 0.25);
  assert.equal(second.retries, 1);
  assert.equal(usageTotal(turn.usage), 262);
  const [tool] = first.tools;
  assert.equal(tool.kind, 'tool');
  if (tool.kind !== 'tool') return;
  assert.equal(tool.status, 'ok');
  assert.equal(tool.approval, 'approve');
  assert.equal(tool.result?.output, 'a.txt\n');
  assert.deepEqual(tool.events.map(e => e.message.type),
    ['ToolCall', 'ToolCallPart', 'ApprovalRequest', 'ApprovalResponse', 'ToolResult']);
  assert.deepEqual(second.entries.map(e => e.kind === 'event' ? e.item.message.type : e.kind), ['StepRetry', 'text']);
});

test('a tool call waits while its approval is asked, and is rejected when refused', () => {
  const statuses = [];
  const tree = new Fold({status: tool => statuses.push(tool.status)});
  const call = {type: 'ToolCall', payload: {type: 'function', id: 'c1', function: {name: 'Shell', arguments: '{}'}}};
  tree.push({type: 'TurnBegin', payload: {user_input: 'x'}}, 1);
  tree.push(call, 2);
  tree.push({type: 'ApprovalRequest', payload: {id: 'r1', tool_call_id: 'c1'}}, 3);
  tree.push({type: 'ApprovalResponse', payload: {request_id: 'r1', response: 'reject'}}, 4);
  assert.deepEqual(statuses, ['waiting', 'rejected']);
});

test('a sub-agent folds into its own turns, under its tool call; a turn end interrupts running calls', () => {
  const tree = byName("a sub-agent's events and a rejected call");
  const [turn] = tree.turns;
  const tools = turn.steps[0].tools.filter(t => t.kind === 'tool');
  assert.deepEqual(tools.map(t => [t.name, t.status]), [['Agent', 'ok'], ['Shell', 'rejected'], ['Shell', 'interrupted']]);
  const [agent] = tools[0].agents;
  assert.equal(agent.type, 'coder');
  assert.equal(agent.fold.turns.length, 1);
  const texts = agent.fold.turns[0].steps[0].entries.filter(e => e.kind === 'text').map(e => e.text);
  assert.deepEqual(texts, ['sub says']);
  assert.equal(usageTotal(usageWithin(agent)), 50);
  assert.equal(usageTotal(usageWithin(turn)), 50);  // the parent reported none of its own
});

test('a message sent by reference becomes a tool call whose arguments load on demand', () => {
  const tree = new Fold();
  const blob = {blob_id: 'b1', size: 123456, preview: '{"type": "function", "id": "c9", "function": {"name": "WriteFile", "arguments": "{\\"pa'};
  tree.push({type: 'ToolCall', blob}, 1);
  tree.push({type: 'ToolResult', blob: {blob_id: 'b2', size: 99999, preview: '{"tool_call_id": "c9", "return_value": {'}}, 2);
  const [tool] = tree.turns[0].steps[0].tools;
  assert.ok(tool.kind === 'tool');
  assert.equal(tool.name, 'WriteFile');
  assert.equal(tool.argsBlob, blob);
  assert.equal(tool.status, 'ok');
  assert.equal(tool.resultBlob?.blob_id, 'b2');
});

test('nested TurnBegins stay in their turn', () => {
  const inputs = [];
  const tree = new Fold({nestedInput: (_turn, input) => inputs.push(input)});
  tree.push({type: 'TurnBegin', payload: {user_input: 'outer'}}, 1);
  tree.push({type: 'TurnBegin', payload: {user_input: 'inner'}}, 2);
  tree.push({type: 'TurnEnd', payload: {}}, 3);
  assert.equal(tree.turn?.input, 'outer');
  tree.push({type: 'TurnEnd', payload: {}}, 4);
  assert.equal(tree.turns.length, 1);
  assert.equal(tree.turns[0].end, 4);
  assert.deepEqual(inputs, ['inner']);
});
