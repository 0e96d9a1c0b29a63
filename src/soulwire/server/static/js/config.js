// @ts-check
// The configuration of the server (the file it was started with, or the share dir's
// config.toml): a form of the settings a person edits, and the raw text. Both are validated by
// the server with the engine's own model before anything is saved; errors show next to their
// field. Secrets never come to the page: the server sends a placeholder, and a placeholder sent
// back keeps the stored value. Sessions opened after saving use the new configuration.

import {el, clear, toast, errorText} from './util.js';
import {web, ApiError} from './api.js';

/** @typedef {Record<string, any>} Json */
/** @typedef {HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement} Input */
/**
 * @typedef {{default_model: HTMLSelectElement, default_thinking: HTMLInputElement, default_yolo: HTMLInputElement,
 *   default_plan_mode: HTMLInputElement, approval: HTMLSelectElement, approval_scope: HTMLSelectElement,
 *   sandbox: HTMLSelectElement, sandbox_network: HTMLInputElement}} Inputs  the form's general settings
 */
/** @typedef {{fresh: boolean, key: string, box?: HTMLElement, removed?: boolean}} Row  an entry of a table (a provider, a model) */
/**
 * @typedef {Row & {original: string, stored: boolean, name: HTMLInputElement, type: HTMLSelectElement,
 *   base_url: HTMLInputElement, api_key: HTMLInputElement, clearKey: HTMLInputElement,
 *   headers: HTMLTextAreaElement, env: HTMLTextAreaElement}} ProviderRow
 */
/**
 * @typedef {Row & {original: string, alias: HTMLInputElement, provider: HTMLSelectElement, model: HTMLInputElement,
 *   size: HTMLInputElement, caps: HTMLInputElement, display: HTMLInputElement}} ModelRow
 */

const PROVIDER_TYPES = ['kimi', 'openai_legacy', 'openai_responses', 'anthropic', 'gemini', 'google_genai', '_scripted_echo', '_echo'];
/** @type {[string, string, string, number][]} */
const LOOP = [
  ['max_steps_per_turn', 'Max steps per turn', 'model calls one turn may make', 1],
  ['max_retries_per_step', 'Max retries per step', 'retries of a failed model call', 1],
  ['max_ralph_iterations', 'Ralph iterations', '0: off, -1: no limit', -1],
  ['reserved_context_size', 'Reserved context', 'tokens kept free for the answer', 1000],
  ['compaction_trigger_ratio', 'Compaction ratio', 'compact when the context is this full (0.5–0.99)', 0.5],
];

/** `KEY=VALUE` lines ⇄ an object (header and environment tables). @param {Record<string, string> | undefined} table */
function linesOf(table) { return Object.entries(table || {}).map(([k, v]) => `${k}=${v}`).join('\n'); }
/** @param {string} text */
function tableOf(text) {
  /** @type {Record<string, string>} */
  const out = {};
  for (const line of text.split('\n')) {
    const at = line.indexOf('=');
    if (line.trim() && at > 0) out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

export class ConfigView {
  /** @param {HTMLElement} main */
  constructor(main) {
    /** dotted field → its error element @type {Map<string, HTMLElement>} */
    this.fields = new Map();
    /** the placeholder the server sends for a stored secret */
    this.secret = '';
    /** @type {Json} the form's values as loaded */
    this.values = {};
    /** @type {Inputs | null} (null until the form is drawn) */
    this.inputs = null;
    /** @type {Record<string, HTMLInputElement>} */
    this.loopInputs = {};
    /** @type {ProviderRow[]} */
    this.providerRows = [];
    /** @type {ModelRow[]} */
    this.modelRows = [];
    this.providerBox = el('div', {class: 'cfg-entries'});
    this.modelBox = el('div', {class: 'cfg-entries'});
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

  /** @param {'form' | 'raw'} which */
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
      this.path.textContent = config.path + (config.exists ? '' : ' (not created yet)');
      this.text.value = config.text;
      this.error.textContent = '';
      this.secret = form.secret;
      this.renderForm(form.values);
    } catch (err) {
      this.error.textContent = errorText(err);
      this.formError.textContent = errorText(err);
    }
  }

  // -- the form --------------------------------------------------------------------------------
  /** A labelled input whose errors show right under it; `path` is the server's field name.
   * @param {string} path @param {string} label @param {Input} input @param {string} [hint] */
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

  /** @param {string[]} options @param {string | undefined} value */
  select(options, value) {
    const node = el('select', null, [...new Set([...options, value].filter(v => v !== undefined && v !== null))].map(o => el('option', {value: o, text: o === '' ? '(none)' : o, selected: o === value})));
    return node;
  }

  /** @param {Json} values */
  renderForm(values) {
    this.values = values;
    this.fields.clear();
    this.formError.textContent = '';
    const v = values;
    const providerNames = Object.keys(v.providers || {});
    const modelNames = Object.keys(v.models || {});
    const i = this.inputs = {
      default_model: this.select(['', ...modelNames], v.default_model || ''),
      default_thinking: el('input', {type: 'checkbox', checked: !!v.default_thinking}),
      default_yolo: el('input', {type: 'checkbox', checked: !!v.default_yolo}),
      default_plan_mode: el('input', {type: 'checkbox', checked: !!v.default_plan_mode}),
      approval: this.select(['ask', 'on-escape'], v.approval),
      approval_scope: this.select(['exact', 'action'], v.approval_scope),
      sandbox: this.select(['off', 'read-only', 'workspace-write'], v.sandbox),
      sandbox_network: el('input', {type: 'checkbox', checked: !!v.sandbox_network}),
    };
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
    clear(this.providerBox);
    clear(this.modelBox);
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

  /** @param {string} name @param {Json} p its values @param {boolean} [fresh] added here, not saved yet */
  addProvider(name, p, fresh = false) {
    const key = fresh ? `new${this.providerRows.length}` : name;
    const stored = p.api_key === this.secret;
    /** @type {ProviderRow} */
    const row = {original: name, fresh, key, stored,
      name: el('input', {value: name, placeholder: 'name', required: true, readonly: !fresh}),
      type: this.select(PROVIDER_TYPES, p.type),
      base_url: el('input', {value: p.base_url || '', placeholder: 'the provider\'s default', spellcheck: 'false'}),
      api_key: el('input', {type: 'password', value: stored ? '' : (p.api_key || ''), autocomplete: 'off',
        placeholder: stored ? 'stored — type to replace' : 'empty: from the environment'}),
      clearKey: el('input', {type: 'checkbox'}),
      headers: el('textarea', {rows: 2, spellcheck: 'false', placeholder: 'Header=value, one per line'}),
      env: el('textarea', {rows: 2, spellcheck: 'false', placeholder: 'NAME=value, one per line'})};
    row.headers.value = linesOf(p.custom_headers);
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

  /** @param {string} alias @param {Json} m its values @param {boolean} [fresh] added here, not saved yet */
  addModel(alias, m, fresh = false) {
    const key = fresh ? `new${this.modelRows.length}` : alias;
    /** @type {ModelRow} */
    const row = {original: alias, fresh, key,
      alias: el('input', {value: alias, placeholder: 'alias', required: true, readonly: !fresh}),
      provider: this.select(Object.keys(this.values.providers || {}), m.provider),
      model: el('input', {value: m.model || '', placeholder: 'e.g. kimi-k2', spellcheck: 'false'}),
      size: el('input', {type: 'number', min: 1, value: m.max_context_size ?? ''}),
      caps: el('input', {value: (m.capabilities || []).join(', '), placeholder: 'thinking, image_in, …'}),
      display: el('input', {value: m.display_name || '', placeholder: 'optional'})};
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
   * gets the focus on `first`.
   * @template {Row} R
   * @param {R[]} rows @param {HTMLElement} box @param {R} row @param {Record<string, string>} dataset
   * @param {string} removeText @param {HTMLElement} first @param {...(HTMLElement | null)} parts */
  entry(rows, box, row, dataset, removeText, first, ...parts) {
    const entry = row.box = el('div', {class: 'cfg-entry', dataset}, ...parts,
      el('button', {type: 'button', class: 'danger', text: removeText, onclick: () => { row.removed = true; entry.remove(); }}));
    rows.push(row);
    box.append(entry);
    if (row.fresh) first.focus();
  }

  /** The values to send: numbers as numbers (a non-number is left as typed, for the server to
   * name), secrets left as the placeholder unless replaced or removed. */
  collect() {
    /** @param {HTMLInputElement} input */
    const num = input => { const text = input.value.trim(); if (text === '') return null; const n = Number(text); return Number.isFinite(n) ? n : text; };
    const i = this.inputs;
    if (!i) return {};
    /** @type {Json} */
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

  /** @param {{field: string, message: string}[]} errors */
  showErrors(errors) {
    for (const node of this.fields.values()) { node.textContent = ''; node.parentElement?.classList.remove('has-error'); }
    /** @type {string[]} */
    const unplaced = [];
    // New entries' fields are named by their row until saved; the server names them by name.
    /** @type {[string, string][]} */
    const renames = [];
    for (const row of this.providerRows) if (row.fresh) renames.push([`providers.${row.name.value.trim()}`, `providers.${row.key}`]);
    for (const row of this.modelRows) if (row.fresh) renames.push([`models.${row.alias.value.trim()}`, `models.${row.key}`]);
    for (const {field, message} of errors) {
      // An error about a field inside a table (a header, an env name) shows under its table.
      let target = field;
      for (const [from, to] of renames) if (target === from || target.startsWith(`${from}.`)) target = to + target.slice(from.length);
      while (target && !this.fields.has(target)) target = target.includes('.') ? target.slice(0, target.lastIndexOf('.')) : '';
      const node = target && this.fields.get(target);
      if (node) {
        node.textContent = message;
        node.parentElement?.classList.add('has-error');  // (a class, not :has(): that would slow every page)
      }
      else unplaced.push(field ? `${field}: ${message}` : message);
    }
    this.formError.textContent = unplaced.join('\n');
    const first = [...this.fields.entries()].find(([, node]) => node.textContent);
    if (first) document.querySelector(/** @type {'input'} */ (`[data-field="${CSS.escape(first[0])}"]`))?.focus();
  }

  async saveForm() {
    try {
      const saved = await web.saveConfigForm(this.collect());
      toast('Configuration saved', 'info', 2000);
      this.renderForm(saved.values);
      const config = await web.config();
      this.text.value = config.text;
    } catch (err) {
      const detail = err instanceof ApiError ? err.detail : null;
      if (detail && typeof detail === 'object' && Array.isArray(detail.errors) && detail.errors.length) this.showErrors(detail.errors);
      else { this.showErrors([]); this.formError.textContent = detail?.message || errorText(err); }
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
      this.error.textContent = errorText(err);
    }
  }
}
