// The trace view's pure parts: the Markdown export (read from the one fold) and the cost sums.

import {test} from 'node:test';
import assert from 'node:assert/strict';
import {readFileSync} from 'node:fs';

import {costOf, fmtCost, toMarkdown} from '../../src/soulwire/server/static/js/trace.js';

/** @type {{vectors: {name: string, events: any[]}[]}} */
const {vectors} = JSON.parse(readFileSync(new URL('./fold_vectors.json', import.meta.url), 'utf8'));
const records = (/** @type {string} */ name) =>
  (vectors.find(v => v.name === name)?.events || []).map((message, i) => ({timestamp: 100 + i, message}));

test('the Markdown export: the prompt, the merged text, each call with its result', () => {
  const markdown = toMarkdown('A session', records('a whole turn with a tool, an approval, a retry and two steps'));
  assert.equal(markdown, [
    '# A session', '',
    '## Turn 1', '',
    '> do it', '',
    'I will list.', '',
    '**Shell** `{"command": "ls"}`', '',
    '→ Shell ok', '',
    '```', 'a.txt\n', '```', '',
    'There is a.txt.', '',
  ].join('\n'));
});

test('the Markdown export leaves the sub-agents\' text out and says which call failed', () => {
  const markdown = toMarkdown('t', records("a sub-agent's events and a rejected call"));
  assert.ok(!markdown.includes('sub says'));
  assert.ok(markdown.includes('→ Shell error: The tool call is rejected by the user.'));
  assert.ok(markdown.includes('**Shell** `{"command": "sleep 100"}`'));
});

test('cost: the same sum as ModelPrice.cost, shown to a sensible precision', () => {
  const price = {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75};
  const usd = costOf({input_other: 1000, output: 100, input_cache_read: 10000, input_cache_creation: 2000}, price);
  assert.ok(usd !== null && Math.abs(usd - (3000 + 1500 + 3000 + 7500) / 1e6) < 1e-12);
  assert.equal(fmtCost(usd), '$0.0150');
  assert.equal(fmtCost(0.00123), '$0.001230');
  assert.equal(fmtCost(12.345), '$12.35');
  assert.equal(costOf(null, price), null);
  assert.equal(fmtCost(null), '');
});
