/**
 * Scope expression templates as the Taskcluster API uses them: `<param>` substitution,
 * `{for, in, each}` expansion and `{if, then, else}`. Satisfaction itself is taskcluster-lib-scopes'.
 */
import * as lib from 'taskcluster-lib-scopes';

export type Expression = lib.Expression;
export type Template =
  string | { AllOf: Template[] } | { AnyOf: Template[] } | { for: string; in: string; each: string } | { if: string; then: Template; else?: Template };

export type Params = Record<string, unknown>;

function substitute(scope: string, params: Params): string {
  return scope.replace(/<([a-zA-Z0-9_]+)>/g, (_m, name: string) => {
    const v = params[name];
    if (typeof v !== 'string' && typeof v !== 'number') {
      throw new Error(`scope template parameter '${name}' is missing or not a string`);
    }
    return String(v);
  });
}

/** Renders a template into a plain expression; `for/each` splices into the parent list. */
export function render(t: Template, params: Params): Expression {
  const out = renderInner(t, params);
  if (Array.isArray(out)) return { AllOf: out };
  return out ?? { AllOf: [] };
}

function renderList(items: Template[], params: Params): Expression[] {
  const out: Expression[] = [];
  for (const i of items) {
    const r = renderInner(i, params);
    if (r === undefined) continue;
    if (Array.isArray(r)) out.push(...r);
    else out.push(r);
  }
  return out;
}

function renderInner(t: Template, params: Params): Expression | Expression[] | undefined {
  if (typeof t === 'string') return substitute(t, params);
  if ('AllOf' in t) return { AllOf: renderList(t.AllOf, params) };
  if ('AnyOf' in t) return { AnyOf: renderList(t.AnyOf, params) };
  if ('for' in t) {
    const list = params[t.in];
    if (!Array.isArray(list)) throw new Error(`scope template list '${t.in}' is missing`);
    return list.map((x) => substitute(t.each, { ...params, [t.for]: x }));
  }
  if ('if' in t) {
    const flag = params[t.if];
    if (typeof flag !== 'boolean') throw new Error(`scope template flag '${t.if}' is not boolean`);
    if (flag) return renderInner(t.then, params);
    return t.else ? renderInner(t.else, params) : undefined;
  }
  throw new Error('invalid scope template');
}

/** The names of every `<param>` a template uses (to tell URL-only templates from deferred ones). */
export function templateParams(t: Template): Set<string> {
  const out = new Set<string>();
  const walk = (x: Template): void => {
    if (typeof x === 'string') {
      for (const m of x.matchAll(/<([a-zA-Z0-9_]+)>/g)) out.add(m[1]);
    } else if ('AllOf' in x) x.AllOf.forEach(walk);
    else if ('AnyOf' in x) x.AnyOf.forEach(walk);
    else if ('for' in x) {
      out.add(x.in);
      for (const m of x.each.matchAll(/<([a-zA-Z0-9_]+)>/g)) if (m[1] !== x.for) out.add(m[1]);
    } else if ('if' in x) {
      out.add(x.if);
      walk(x.then);
      if (x.else) walk(x.else);
    }
  };
  walk(t);
  return out;
}

export const satisfies = lib.satisfiesExpression;
export const unsatisfied = lib.removeGivenScopes;
export const validScope = lib.validScope;
/** Sorted, without duplicates or scopes a star scope covers (the library's normalizer needs sorted input). */
export const normalize = (scopes: string[]): string[] => lib.normalizeScopeSet([...scopes].sort(lib.scopeCompare));

/** Taskcluster refuses stored scopes ending in `**`: they read as a star scope for a `*`-prefixed one. */
export const endsWithDoubleStar = (scopes: string[] | undefined): boolean => (scopes ?? []).some((s) => s.endsWith('**'));
export const merge = lib.mergeScopeSets;
