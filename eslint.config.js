// ESLint for the web UI's JavaScript (flat config): the recommended rules, plus a few that catch
// what review keeps finding (== instead of ===, unused or shadowed names, var). `npm run lint`.
import js from '@eslint/js';
import globals from 'globals';

export default [
  // .pytest_cache: the Node SDK test runs its check script from the SDK's install there.
  {ignores: ['node_modules/', '.venv*/', '.pytest_cache/', 'site/', 'build/', 'dist/']},
  js.configs.recommended,
  {
    files: ['src/soulwire/server/static/js/**/*.js'],
    languageOptions: {ecmaVersion: 2022, sourceType: 'module', globals: globals.browser},
  },
  {
    files: ['tests/**/*.js', 'tests/**/*.mjs', 'eslint.config.js'],
    languageOptions: {ecmaVersion: 2022, sourceType: 'module', globals: globals.node},
  },
  {
    rules: {
      eqeqeq: ['error', 'always'],
      'no-var': 'error',
      'prefer-const': 'error',
      'no-shadow': 'error',
      'no-unused-vars': ['error', {argsIgnorePattern: '^_'}],
      'no-implicit-coercion': ['error', {allow: ['!!']}],
      'no-throw-literal': 'error',
      'no-promise-executor-return': 'error',
    },
  },
];
