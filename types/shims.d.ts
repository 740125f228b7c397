declare module 'taskcluster-lib-scopes' {
  export type Expression = string | { AllOf: Expression[] } | { AnyOf: Expression[] };
  export function validScope(scope: string): boolean;
  export function validExpression(expr: unknown): boolean;
  export function satisfiesExpression(scopes: string[], expr: Expression): boolean;
  export function scopesSatisfying(scopes: string[], expr: Expression): string[] | undefined;
  export function removeGivenScopes(scopes: string[], expr: Expression): Expression | null;
  export function normalizeScopeSet(scopes: string[]): string[];
  export function mergeScopeSets(a: string[], b: string[]): string[];
  export function scopeCompare(a: string, b: string): number;
  export function scopeUnion(a: string[], b: string[]): string[];
  export function scopeIntersection(a: string[], b: string[]): string[];
  export function patternMatch(pattern: string, scope: string): boolean;
  export function simplifyScopeExpression(expr: Expression): Expression;
}
declare module 'hawk';
declare module 'taskcluster-client';
declare module 'tc10';
