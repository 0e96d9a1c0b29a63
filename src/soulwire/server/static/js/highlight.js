// @ts-check
// A small syntax highlighter: one tokenizing regular expression per language family (comments,
// strings, numbers, keywords), producing spans. Enough to make code readable; unknown languages
// stay plain text.

const KEYWORDS = {
  py: 'False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case self',
  js: 'async await break case catch class const continue debugger default delete do else export extends false finally for function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while with yield interface type enum implements readonly',
  sh: 'if then else elif fi for while until do done case esac in function return export local set unset echo cd exit source',
  c: 'auto break case char const continue default do double else enum extern float for goto if inline int long register return short signed sizeof static struct switch typedef union unsigned void volatile while bool true false null nullptr class public private protected namespace template typename new delete this virtual override fn let mut pub impl trait use mod match crate self Self struct where loop move ref func go chan defer package import var type range map interface select fallthrough',
  rb: 'def end class module if elsif else unless while until for in do return yield begin rescue ensure nil true false self require',
};
const FAMILY = {
  python: 'py', py: 'py', javascript: 'js', js: 'js', ts: 'js', typescript: 'js', jsx: 'js', tsx: 'js', mjs: 'js',
  json: 'json', bash: 'sh', sh: 'sh', shell: 'sh', zsh: 'sh', console: 'sh', c: 'c', cpp: 'c', 'c++': 'c', h: 'c',
  java: 'c', go: 'c', rust: 'c', rs: 'c', kotlin: 'c', swift: 'c', cs: 'c', csharp: 'c', ruby: 'rb', rb: 'rb',
  toml: 'toml', yaml: 'toml', yml: 'toml', ini: 'toml', diff: 'diff', patch: 'diff',
};
const COMMENT = {py: '#[^\\n]*', sh: '#[^\\n]*', rb: '#[^\\n]*', toml: '#[^\\n]*', js: '\\/\\/[^\\n]*|\\/\\*[\\s\\S]*?\\*\\/', c: '\\/\\/[^\\n]*|\\/\\*[\\s\\S]*?\\*\\/', json: '(?!)'};
const STRING = `"""[\\s\\S]*?"""|'''[\\s\\S]*?'''|"(?:[^"\\\\\\n]|\\\\.)*"|'(?:[^'\\\\\\n]|\\\\.)*'|\`(?:[^\`\\\\]|\\\\.)*\``;
/** @type {Map<string, RegExp>} */
const cache = new Map();

/** @param {string} family */
function tokenizer(family) {
  const known = cache.get(family);
  if (known) return known;
  const words = (KEYWORDS[/** @type {keyof KEYWORDS} */ (family)] || '').split(' ').filter(Boolean);
  const parts = [`(${COMMENT[/** @type {keyof COMMENT} */ (family)] || '(?!)'})`, `(${STRING})`, '(\\b\\d[\\d_]*(?:\\.\\d+)?(?:e[+-]?\\d+)?\\b|\\b0x[0-9a-f]+\\b)',
    words.length ? `(\\b(?:${words.join('|')})\\b)` : '(?!)'];
  const re = new RegExp(parts.join('|'), 'gi');
  cache.set(family, re);
  return re;
}

/** @param {string} cls @param {string} text */
function span(cls, text) {
  const s = document.createElement('span');
  s.className = cls;
  s.textContent = text;
  return s;
}

/** Highlighted code as a fragment of text nodes and spans. @param {string} code @param {string} [lang] */
export function highlight(code, lang) {
  const out = document.createDocumentFragment();
  const family = FAMILY[/** @type {keyof FAMILY} */ ((lang || '').toLowerCase())];
  if (!family || code.length > 200000) { out.append(code); return out; }
  if (family === 'diff') {
    for (const line of code.split('\n')) {
      const cls = line.startsWith('+') ? 'tok-add' : line.startsWith('-') ? 'tok-del' : line.startsWith('@@') ? 'tok-k' : null;
      out.append(cls ? span(cls, line) : line, '\n');
    }
    return out;
  }
  const re = tokenizer(family === 'json' ? 'json' : family);
  re.lastIndex = 0;
  let last = 0;
  let m;
  while ((m = re.exec(code))) {
    if (m[0] === '') { re.lastIndex++; continue; }
    if (m.index > last) out.append(code.slice(last, m.index));
    const cls = m[1] !== undefined ? 'tok-c' : m[2] !== undefined ? 'tok-s' : m[3] !== undefined ? 'tok-n' : 'tok-k';
    out.append(span(cls, m[0]));
    last = re.lastIndex;
  }
  if (last < code.length) out.append(code.slice(last));
  return out;
}
