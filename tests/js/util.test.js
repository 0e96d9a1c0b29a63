// The approval title's action, as the terminal UI words it (tests/unit/test_spoken_action.py).

import {test} from 'node:test';
import assert from 'node:assert/strict';

import {spokenAction} from '../../src/soulwire/server/static/js/util.js';

test("a delegated ACP agent's tool kind is worded for a person; other actions pass as they are", () => {
  assert.equal(spokenAction('acp:kimi:edit'), 'edit files (ACP)');
  assert.equal(spokenAction('acp:kimi:execute'), 'run a command (ACP)');
  assert.equal(spokenAction('acp:kimi:other'), 'act (ACP)');
  assert.equal(spokenAction('run command'), 'run command');
});
