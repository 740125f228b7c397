// ESLint flat config: the recommended JavaScript and TypeScript rule sets, tuned where noted.
// Syntactic rules only (no type information), so a full run stays a few seconds on two cores.
import { defineConfig } from 'eslint/config';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

export default defineConfig(
  { ignores: ['node_modules/', 'dist/', '.local/', '.package/', 'coverage/', 'test-output/', 'docs/', 'infra/'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2022, sourceType: 'module', globals: { ...globals.node } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Wire payloads, SDK entities and taskcluster-client (untyped) are handled as `any` on purpose at the edges.
      '@typescript-eslint/no-explicit-any': 'off',
      // `_`-prefixed names mark parameters a signature requires but the body does not use.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true }],
    },
  },
  {
    // Plain CommonJS scripts and configs run by node directly.
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // The dashboard's script runs in the browser, not in node.
    files: ['shared/ops/dashboard/**/*.js'],
    languageOptions: { sourceType: 'script', globals: { ...globals.browser } },
  },
);
