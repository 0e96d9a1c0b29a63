// The configuration of the server (the file it was started with, or the share dir's
// config.toml): a form of the settings a person edits, and the raw text. Both are validated by
// the server with the engine's own model before anything is saved; errors show next to their
// field. Secrets never come to the page: the server sends a placeholder, and a placeholder sent
// back keeps the stored value. Sessions opened after saving use the new configuration.

import {el, clear, toast} from './util.js';
import {web} from './api.js';

const PROVIDER_TYPES = ['kimi', 'openai_legacy', 'openai_responses', 'anthropic', 'gemini', 'google_genai', '_scripted_echo', '_echo'];
const LOOP = [
  ['max_steps_per_turn', 'Max steps per turn', 'model calls one turn may make', 1],
  ['max_retries_per_step', 'Max retries per step', 'retries of a failed model call', 1],
  ['max_ralph_iterations', 'Ralph iterations', '0: off, -1: no limit', -1],
  ['reserved_context_size', 'Reserved context', 'tokens kept free for the answer', 1000],
  ['compaction_trigger_ratio', 'Compaction ratio', 'compact when the context is this full (0.5–0.99)', 0.5],
];

/** `KEY=VALUE` lines ⇄ an object (header and environment tables). */
function linesOf(table) { return Object.entries(table || {}).map(([k, v]) => `${k}=${v}`).join('\n'); }
function tableOf(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const at = line.indexOf('=');
    if (line.trim() && at > 0) out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

export class ConfigView {
  constructor(main) {
    this.fields = new Map();  // dotted field → its error element
    this.formBox = el('div', {class: 'config-form-body'}, el('p', {class: 'muted', text: 'Loading…'}));
    this.formError = el('div', {class: 'config-error', role: 'alert', id: 'config-form-error'});
    this.text = el('textarea', {id: 'config-text', class: 'config-text', spellcheck: 'false', rows: 24, 'aria-label': 'Configuration text'});
    this.path = el('code');
    this.error = el('div', {class: 'config-error', role: 'alert'});
    const formSave = el('button', {type: 'submit', class: 'primary', id: 'config-save-form', text: 'Save settings'});
    this.settings = el('form', {class: 'config-settings', id: 'config-settings', 'aria-label': 'Settings', novalidate: true},  // the server's checks, shown by their field
      this.formBox, this.formError,
      el('div', {class: 'actions'}, formSave, el('button', {type: 'button', onclick: () => this.load(), text: 'Revert'})));
    this.settings.addEventListener('submit', event => { event.preventDefault(); this.saveForm(); });
    const rawSave = el('button', {type: 'submit', class: 'primary', id: 'config-save-raw', text: 'Save text'});
    this.raw = el('form', {class: 'config-raw', hidden: true, 'aria-label': 'Raw text'},
      el('p', {class: 'muted', text: 'Secrets show as <secret: unchanged>; leave them so to keep the stored values.'}),
      this.text, this.error,
      el('div', {class: 'actions'}, rawSave, el('button', {type: 'button', onclick: () => this.load(), text: 'Revert'})));
    this.raw.addEventListener('submit', event => { event.preventDefault(); this.save(); });
    this.text.addEventListener('keydown', event => {
      if ((event.ctrlKey || event.metaKey) && event.key === 's') { event.preventDefault(); this.save(); }
    });
    this.tabForm = el('button', {type: 'button', role: 'tab', id: 'config-tab-form', 'aria-selected': 'true', text: 'Settings', onclick: () => this.tab('form')});
    this.tabRaw = el('button', {type: 'button', role: 'tab', id: 'config-tab-raw', 'aria-selected': 'false', text: 'Raw text', onclick: () => this.tab('raw')});
    clear(main).append(el('div', {class: 'page'}, el('div', {class: 'card form wide'},
      el('h1', {text: 'Configuration'}),
      el('p', {class: 'muted'}, 'File: ', this.path, ' — saved only when valid; sessions opened afterwards use it.'),
      el('div', {class: 'tabs', role: 'tablist'}, this.tabForm, this.tabRaw),
      this.settings, this.raw)));
    this.load();
  }

  destroy() {}

  tab(which) {
    const raw = which === 'raw';
    this.raw.hidden = !raw;
    this.settings.hidden = raw;
    this.tabForm.setAttribute('aria-selected', String(!raw));
    this.tabRaw.setAttribute('aria-selected', String(raw));
  }

  async load() {
    try {
      const [config, form] = await Promise.all([web.config(), web.configForm()]);
      this.format = config.format;
      this.path.textContent = config.path + (config.exists ? '' : ' (not created yet)');
      this.text.value = config.text;
      this.error.textContent = '';
      this.secret = form.secret;
      this.renderForm(form.values);
    } catch (err) {
      this.error.textContent = err.message;
      this.formError.textContent = err.message;
    }
  }

  // -- the form --------------------------------------------------------------------------------
  /** A labelled input whose errors show right under it; `path` is the server's field name. */
  field(path, label, input, hint) {
    const id = `cfg-${path.replace(/[^A-Za-z0-9_-]/g, '_')}`;
    input.id = id;
    input.dataset.field = path;
    const error = el('div', {class: 'field-error', role: 'alert', id: `${id}-error`});
    input.setAttribute('aria-describedby', `${id}-error`);
    this.fields.set(path, error);
    const box = el('div', {class: input.type === 'checkbox' ? 'cfg-field check' : 'cfg-field'});
    if (input.type === 'checkbox') box.append(el('label', {for: id}, input, ` ${label}`));
    else box.append(el('label', {for: id, text: label}), input);
    if (hint) box.append(el('span', {class: 'muted field-hint', text: hint}));
    box.append(error);
    return box;
  }

  select(options, value) {
    const node = el('select', null, [...new Set([...options, value].filter(v => v !== undefined && v !== null))].map(o => el('option', {value: o, text: o === '' ? '(none)' : o, selected: o === value})));
    return node;
  }

  renderForm(values) {
    this.values = values;
    this.fields.clear();
    this.formError.textContent = '';
    const v = values;
    const providerNames = Object.keys(v.providers || {});
    const modelNames = Object.keys(v.models || {});
    this.inputs = {
      default_model: this.select(['', ...modelNames], v.default_model || ''),
      default_thinking: el('input', {type: 'checkbox', checked: !!v.default_thinking}),
      default_yolo: el('input', {type: 'checkbox', checked: !!v.default_yolo}),
      default_plan_mode: el('input', {type: 'checkbox', checked: !!v.default_plan_mode}),
      approval: this.select(['ask', 'on-escape'], v.approval),
      approval_scope: this.select(['exact', 'action'], v.approval_scope),
      sandbox: this.select(['off', 'read-only', 'workspace-write'], v.sandbox),
      sandbox_network: el('input', {type: 'checkbox', checked: !!v.sandbox_network}),
    };
    const i = this.inputs;
    const general = el('fieldset', {class: 'cfg-section'}, el('legend', {text: 'Defaults'}),
      el('div', {class: 'cfg-grid'},
        this.field('default_model', 'Default model', i.default_model, 'sessions use it unless they pick another'),
        this.field('approval', 'Approval', i.approval, 'on-escape: ask only to leave the sandbox'),
        this.field('approval_scope', 'Approve for session remembers', i.approval_scope, 'exact: what you saw; action: the whole action'),
        this.field('sandbox', 'Sandbox', i.sandbox, 'where Shell and file tools may act (bubblewrap)')),
      el('div', {class: 'cfg-checks'},
        this.field('default_yolo', 'YOLO by default (no approvals)', i.default_yolo),
        this.field('default_thinking', 'Thinking on by default', i.default_thinking),
        this.field('default_plan_mode', 'Start sessions in plan mode', i.default_plan_mode),
        this.field('sandbox_network', 'Network inside the sandbox', i.sandbox_network)));
    this.loopInputs = {};
    const loop = el('fieldset', {class: 'cfg-section'}, el('legend', {text: 'Loop control'}),
      el('div', {class: 'cfg-grid'}, LOOP.map(([key, label, hint, min]) => {
        const input = el('input', {type: 'number', value: v.loop_control?.[key] ?? '', min, step: key === 'compaction_trigger_ratio' ? '0.01' : '1'});
        this.loopInputs[key] = input;
        return this.field(`loop_control.${key}`, label, input, hint);
      })));
    this.providerBox = el('div', {class: 'cfg-entries'});
    this.modelBox = el('div', {class: 'cfg-entries'});
    this.providerRows = [];
    this.modelRows = [];
    for (const [name, p] of Object.entries(v.providers || {})) this.addProvider(name, p);
    for (const [alias, m] of Object.entries(v.models || {})) this.addModel(alias, m);
    const providers = el('fieldset', {class: 'cfg-section'}, el('legend', {text: 'Providers'}), this.providerBox,
      el('button', {type: 'button', id: 'cfg-add-provider', onclick: () => this.addProvider('', {type: 'openai_legacy', base_url: '', api_key: '', custom_headers: {}, env: {}}, true), text: 'Add provider'}));
    const models = el('fieldset', {class: 'cfg-section'}, el('legend', {text: 'Models'}), this.modelBox,
      el('button', {type: 'button', id: 'cfg-add-model', onclick: () => this.addModel('', {provider: providerNames[0] || '', model: '', max_context_size: 262144, capabilities: [], display_name: null}, true), text: 'Add model'}));
    clear(this.formBox).append(general, loop, providers, models,
      el('p', {class: 'muted', text: 'Hooks, services, background tasks and MCP settings: edit them in the raw text (this form keeps them).'}));
  }

  addProvider(name, p, fresh = false) {
    const key = fresh ? `new${this.providerRows.length}` : name;
    const row = {original: name, fresh, key, stored: p.api_key === this.secret};
    row.name = el('input', {value: name, placeholder: 'name', required: true, readonly: !fresh});
    row.type = this.select(PROVIDER_TYPES, p.type);
    row.base_url = el('input', {value: p.base_url || '', placeholder: 'the provider\'s default', spellcheck: 'false'});
    row.api_key = el('input', {type: 'password', value: row.stored ? '' : (p.api_key || ''), autocomplete: 'off',
      placeholder: row.stored ? 'stored — type to replace' : 'empty: from the environment'});
    row.clearKey = el('input', {type: 'checkbox'});
    row.headers = el('textarea', {rows: 2, spellcheck: 'false', placeholder: 'Header=value, one per line'});
    row.headers.value = linesOf(p.custom_headers);
    row.env = el('textarea', {rows: 2, spellcheck: 'false', placeholder: 'NAME=value, one per line'});
    row.env.value = linesOf(p.env);
    const path = `providers.${key}`;
    this.entry(this.providerRows, this.providerBox, row, {provider: name}, 'Remove provider', row.name,
      el('div', {class: 'cfg-grid'},
        this.field(`${path}.name`, 'Provider name', row.name),
        this.field(`${path}.type`, 'Type', row.type),
        this.field(`${path}.base_url`, 'Base URL', row.base_url),
        this.field(`${path}.api_key`, 'API key', row.api_key, row.stored ? 'a key is stored; it is never shown' : '')),
      row.stored ? this.field(`${path}.clear_key`, 'Remove the stored key', row.clearKey) : null,
      el('div', {class: 'cfg-grid'},
        this.field(`${path}.custom_headers`, 'Custom headers', row.headers, 'stored values show as the placeholder'),
        this.field(`${path}.env`, 'Environment', row.env)));
  }

  addModel(alias, m, fresh = false) {
    const key = fresh ? `new${this.modelRows.length}` : alias;
    const row = {original: alias, fresh, key};
    row.alias = el('input', {value: alias, placeholder: 'alias', required: true, readonly: !fresh});
    row.provider = this.select(Object.keys(this.values.providers || {}), m.provider);
    row.model = el('input', {value: m.model || '', placeholder: 'e.g. kimi-k2', spellcheck: 'false'});
    row.size = el('input', {type: 'number', min: 1, value: m.max_context_size ?? ''});
    row.caps = el('input', {value: (m.capabilities || []).join(', '), placeholder: 'thinking, image_in, …'});
    row.display = el('input', {value: m.display_name || '', placeholder: 'optional'});
    const path = `models.${key}`;
    this.entry(this.modelRows, this.modelBox, row, {model: alias}, 'Remove model', row.alias,
      el('div', {class: 'cfg-grid'},
        this.field(`${path}.alias`, 'Alias', row.alias),
        this.field(`${path}.provider`, 'Provider', row.provider),
        this.field(`${path}.model`, 'Model name', row.model),
        this.field(`${path}.max_context_size`, 'Context size', row.size),
        this.field(`${path}.capabilities`, 'Capabilities', row.caps),
        this.field(`${path}.display_name`, 'Display name', row.display)));
  }

  /** A removable entry of `rows`, shown in `box`: its parts and a Remove button; a fresh one
   * gets the focus on `first`. */
  entry(rows, box, row, dataset, removeText, first, ...parts) {
    row.box = el('div', {class: 'cfg-entry', dataset}, ...parts,
      el('button', {type: 'button', class: 'danger', text: removeText, onclick: () => { row.removed = true; row.box.remove(); }}));
    rows.push(row);
    box.append(row.box);
    if (row.fresh) first.focus();
  }

  /** The values to send: numbers as numbers (a non-number is left as typed, for the server to
   * name), secrets left as the placeholder unless replaced or removed. */
  collect() {
    const num = input => { const text = input.value.trim(); if (text === '') return null; const n = Number(text); return Number.isFinite(n) ? n : text; };
    const i = this.inputs;
    const values = {
      default_model: i.default_model.value,
      default_thinking: i.default_thinking.checked,
      default_yolo: i.default_yolo.checked,
      default_plan_mode: i.default_plan_mode.checked,
      approval: i.approval.value,
      approval_scope: i.approval_scope.value,
      sandbox: i.sandbox.value,
      sandbox_network: i.sandbox_network.checked,
      loop_control: Object.fromEntries(Object.entries(this.loopInputs).map(([k, input]) => [k, num(input)])),
      providers: {},
      models: {},
    };
    for (const row of this.providerRows.filter(r => !r.removed)) {
      const name = row.name.value.trim();
      if (!name) continue;
      const typed = row.api_key.value;
      values.providers[name] = {
        type: row.type.value,
        base_url: row.base_url.value.trim(),
        api_key: typed ? typed : row.stored && !row.clearKey.checked ? this.secret : '',
        custom_headers: tableOf(row.headers.value),
        env: tableOf(row.env.value),
      };
    }
    for (const row of this.modelRows.filter(r => !r.removed)) {
      const alias = row.alias.value.trim();
      if (!alias) continue;
      values.models[alias] = {
        provider: row.provider.value,
        model: row.model.value.trim(),
        max_context_size: num(row.size),
        capabilities: row.caps.value.split(',').map(c => c.trim()).filter(Boolean),
        display_name: row.display.value.trim() || null,
      };
    }
    return values;
  }

  showErrors(errors) {
    for (const node of this.fields.values()) { node.textContent = ''; node.parentElement?.classList.remove('has-error'); }
    const unplaced = [];
    // New entries' fields are named by their row until saved; the server names them by name.
    const renames = [];
    for (const row of this.providerRows) if (row.fresh) renames.push([`providers.${row.name.value.trim()}`, `providers.${row.key}`]);
    for (const row of this.modelRows) if (row.fresh) renames.push([`models.${row.alias.value.trim()}`, `models.${row.key}`]);
    for (const {field, message} of errors) {
      // An error about a field inside a table (a header, an env name) shows under its table.
      let target = field;
      for (const [from, to] of renames) if (target === from || target.startsWith(`${from}.`)) target = to + target.slice(from.length);
      while (target && !this.fields.has(target)) target = target.includes('.') ? target.slice(0, target.lastIndexOf('.')) : '';
      if (target) {
        const node = this.fields.get(target);
        node.textContent = message;
        node.parentElement?.classList.add('has-error');  // (a class, not :has(): that would slow every page)
      }
      else unplaced.push(field ? `${field}: ${message}` : message);
    }
    this.formError.textContent = unplaced.join('\n');
    const first = [...this.fields.entries()].find(([, node]) => node.textContent);
    if (first) document.querySelector(`[data-field="${CSS.escape(first[0])}"]`)?.focus();
  }

  async saveForm() {
    try {
      const saved = await web.saveConfigForm(this.collect());
      toast('Configuration saved', 'info', 2000);
      this.renderForm(saved.values);
      const config = await web.config();
      this.text.value = config.text;
    } catch (err) {
      const detail = err.detail;
      if (detail && typeof detail === 'object' && Array.isArray(detail.errors) && detail.errors.length) this.showErrors(detail.errors);
      else { this.showErrors([]); this.formError.textContent = detail?.message || err.message; }
    }
  }

  // -- the raw text ----------------------------------------------------------------------------
  async save() {
    try {
      await web.saveConfig(this.text.value);
      this.error.textContent = '';
      toast('Configuration saved', 'info', 2000);
      const form = await web.configForm();
      this.renderForm(form.values);
    } catch (err) {
      this.error.textContent = err.message;
    }
  }
}
