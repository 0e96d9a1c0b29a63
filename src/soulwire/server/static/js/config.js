// The configuration file of the server (the one it was started with, or the share dir's
// config.toml): a small form for the common keys and the raw text, validated by the server
// before it is saved. Sessions opened after saving use it.

import {el, clear, toast} from './util.js';
import {web} from './api.js';

const DEFAULT_MODEL = /^\s*default_model\s*=\s*"([^"]*)"/m;

export class ConfigView {
  constructor(main) {
    this.text = el('textarea', {id: 'config-text', class: 'config-text', spellcheck: 'false', rows: 24, 'aria-label': 'Configuration text'});
    this.path = el('code');
    this.error = el('div', {class: 'config-error', role: 'alert'});
    this.model = el('input', {id: 'config-model', placeholder: 'alias from [models]'});
    this.form = el('div', {class: 'config-form'},
      el('label', {for: 'config-model', text: 'Default model'}), this.model,
      el('button', {type: 'button', onclick: () => this.applyForm(), text: 'Apply to the text'}));
    const save = el('button', {type: 'submit', class: 'primary', text: 'Save'});
    const form = el('form', {class: 'card form wide'},
      el('h1', {text: 'Configuration'}),
      el('p', {class: 'muted'}, 'File: ', this.path, ' — saved only when valid; sessions opened afterwards use it.'),
      this.form, this.text, this.error,
      el('div', {class: 'actions'}, save, el('button', {type: 'button', onclick: () => this.load(), text: 'Revert'})));
    form.addEventListener('submit', event => { event.preventDefault(); this.save(); });
    this.text.addEventListener('keydown', event => {
      if ((event.ctrlKey || event.metaKey) && event.key === 's') { event.preventDefault(); this.save(); }
    });
    clear(main).append(el('div', {class: 'page'}, form));
    this.load();
  }

  destroy() {}

  async load() {
    try {
      const config = await web.config();
      this.format = config.format;
      this.path.textContent = config.path + (config.exists ? '' : ' (not created yet)');
      this.text.value = config.text;
      this.error.textContent = '';
      this.readForm();
    } catch (err) {
      this.error.textContent = err.message;
    }
  }

  readForm() {
    const text = this.text.value;
    if (this.format === 'json') {
      try { this.model.value = JSON.parse(text || '{}').default_model || ''; } catch { this.model.value = ''; }
    } else this.model.value = DEFAULT_MODEL.exec(text)?.[1] || '';
  }

  applyForm() {
    const model = this.model.value.trim();
    let text = this.text.value;
    if (this.format === 'json') {
      try {
        const data = JSON.parse(text || '{}');
        data.default_model = model;
        text = JSON.stringify(data, null, 2);
      } catch (err) { this.error.textContent = `The text is not valid JSON: ${err.message}`; return; }
    } else if (DEFAULT_MODEL.test(text)) text = text.replace(DEFAULT_MODEL, m => m.replace(/"[^"]*"/, JSON.stringify(model)));
    else text = `default_model = ${JSON.stringify(model)}\n${text}`;
    this.text.value = text;
  }

  async save() {
    try {
      await web.saveConfig(this.text.value);
      this.error.textContent = '';
      toast('Configuration saved', 'info', 2000);
    } catch (err) {
      this.error.textContent = err.message;
    }
  }
}
