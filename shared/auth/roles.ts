/**
 * Role expansion: `assume:<roleId>` scopes pull in the role's scopes, recursively, with stars in
 * both directions and `<..>` parameters in roles whose id ends in `*`.
 */
import { normalize } from './scopes';

export interface Role {
  roleId: string;
  scopes: string[];
}

/** Parameterised roles could otherwise expand forever. */
const MAX_EXPANSION_ROUNDS = 50;

function rolesFor(scope: string, roles: Role[]): string[] {
  if (scope === '*' || scope === 'assume*' || scope === 'assume:*') {
    return roles.flatMap((r) => r.scopes.map((s) => s.replace(/<\.\.>/g, '*')));
  }
  if (!scope.startsWith('assume:')) return [];
  const held = scope.slice('assume:'.length);
  const out: string[] = [];
  for (const r of roles) {
    const id = r.roleId;
    if (held.endsWith('*')) {
      const prefix = held.slice(0, -1);
      if (id.startsWith(prefix)) {
        out.push(...r.scopes.map((s) => s.replace(/<\.\.>/g, '*')));
        continue;
      }
      // A star role whose fixed part is a prefix of the held prefix also matches.
      if (id.endsWith('*') && prefix.startsWith(id.slice(0, -1))) {
        const param = held.slice(id.length - 1);
        out.push(...r.scopes.map((s) => s.replace(/<\.\.>/g, param)));
      }
      continue;
    }
    if (id === held) out.push(...r.scopes);
    else if (id.endsWith('*') && held.startsWith(id.slice(0, -1))) {
      const param = held.slice(id.length - 1);
      out.push(...r.scopes.map((s) => s.replace(/<\.\.>/g, param)));
    }
  }
  return out;
}

const PARAM = '<..>';

/**
 * The star roles a star role's `assume:<prefix><..>…` scope can reach with its parameter carried
 * along: those whose fixed part and `<prefix>` are prefixes one of the other.
 */
function carries(from: Role, roles: Role[]): Role[] {
  if (!from.roleId.endsWith('*')) return [];
  const prefixes = from.scopes.filter((s) => s.startsWith('assume:') && s.includes(PARAM)).map((s) => s.slice('assume:'.length, s.indexOf(PARAM)));
  return roles.filter((to) => {
    if (!to.roleId.endsWith('*')) return false;
    const fixed = to.roleId.slice(0, -1);
    return prefixes.some((p) => p.startsWith(fixed) || fixed.startsWith(p));
  });
}

/**
 * A cycle of star roles passing their parameter on (`test*` → `assume:other<..>x`, `other*` →
 * `assume:te<..>`) can grow the parameter at every turn and expand without bound. As Taskcluster
 * (a DependencyCycleError, answered 400), any such cycle is refused when a role is stored.
 * Answers the role ids around the first cycle found, or undefined.
 */
export function parameterCycle(roles: Role[]): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (r: Role): string[] | undefined => {
    state.set(r.roleId, 'open');
    path.push(r.roleId);
    for (const next of carries(r, roles)) {
      const st = state.get(next.roleId);
      if (st === 'open') return [...path.slice(path.indexOf(next.roleId)), next.roleId];
      if (st === undefined) {
        const found = visit(next);
        if (found) return found;
      }
    }
    path.pop();
    state.set(r.roleId, 'done');
    return undefined;
  };
  for (const r of roles) {
    if (state.has(r.roleId)) continue;
    const found = visit(r);
    if (found) return found;
  }
  return undefined;
}

/** Expands a scope set through the roles until nothing new appears. */
export function expandScopes(scopes: string[], roles: Role[]): string[] {
  let current = normalize([...scopes]);
  const seen = new Set<string>();
  for (let round = 0; round < MAX_EXPANSION_ROUNDS; round++) {
    const added: string[] = [];
    for (const s of current) {
      if (seen.has(s)) continue;
      seen.add(s);
      added.push(...rolesFor(s, roles));
    }
    if (added.length === 0) return current;
    const next = normalize([...current, ...added]);
    if (next.length === current.length && next.every((s, i) => s === current[i])) return current;
    current = next;
  }
  throw new Error('role expansion did not converge (cyclic parameterised roles?)');
}
