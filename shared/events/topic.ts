/**
 * AMQP topic-exchange semantics for subscription bindings: a pattern is words separated by `.`,
 * where `*` matches exactly one word and `#` matches zero or more words. A binding matches an
 * event if its exchange is the event's and its pattern matches the primary routing key or any of
 * the event's `route.` CCs (as RabbitMQ delivers a message once however many keys match).
 */
import type { QueueEvent } from './exchanges';
import { BINDABLE_EXCHANGES, MAX_ROUTING_KEY } from './exchanges';
import { BoundedCache } from '../bounded-cache';

export interface Binding {
  exchange: string;
  routingKeyPattern: string;
}

/** Patterns are routing keys with wildcards, so they share the routing-key limit. */
export const MAX_PATTERN_LENGTH = MAX_ROUTING_KEY;

/** Why a binding is unusable, or undefined if it is fine. */
export function bindingProblem(b: Binding): string | undefined {
  if (typeof b?.exchange !== 'string' || !BINDABLE_EXCHANGES.includes(b.exchange)) {
    return `unknown exchange '${b?.exchange}'; this service publishes ${BINDABLE_EXCHANGES.join(', ')}`;
  }
  const p = b.routingKeyPattern;
  if (typeof p !== 'string' || p.length === 0) return 'routingKeyPattern must be a non-empty string';
  if (p.length > MAX_PATTERN_LENGTH) return `routingKeyPattern is longer than ${MAX_PATTERN_LENGTH} characters`;
  for (const w of p.split('.')) {
    if (w === '') return `routingKeyPattern '${p}' has an empty word`;
    if ((w.includes('*') || w.includes('#')) && w !== '*' && w !== '#') return `routingKeyPattern '${p}': '*' and '#' must be whole words`;
  }
  return undefined;
}

/** Enough for every binding of a deployment's subscriptions and hooks; past it the oldest go. */
const MAX_CACHED_PATTERNS = 10_000;
/** Patterns split into words, kept: matching runs for every subscription on every write. */
const patternWords = new BoundedCache<string, string[]>(MAX_CACHED_PATTERNS);

function wordsOf(pattern: string): string[] {
  let p = patternWords.get(pattern);
  if (!p) {
    p = pattern.split('.');
    patternWords.set(pattern, p);
  }
  return p;
}

/** Whether `pattern` matches `key` under AMQP topic rules. */
export function topicMatches(pattern: string, key: string): boolean {
  const p = wordsOf(pattern);
  const k = key.split('.');
  // memo[i * (k.length + 1) + j]: p[i..] matches k[j..] (1 yes, 2 no, 0 not known); patterns are short, so the table is tiny.
  const memo = new Uint8Array((p.length + 1) * (k.length + 1));
  const go = (i: number, j: number): boolean => {
    const id = i * (k.length + 1) + j;
    if (memo[id]) return memo[id] === 1;
    let r: boolean;
    if (i === p.length) r = j === k.length;
    else if (p[i] === '#') r = go(i + 1, j) || (j < k.length && go(i, j + 1));
    else r = j < k.length && (p[i] === '*' || p[i] === k[j]) && go(i + 1, j + 1);
    memo[id] = r ? 1 : 2;
    return r;
  };
  return go(0, 0);
}

export function bindingMatches(b: Binding, e: Pick<QueueEvent, 'exchange' | 'routingKey' | 'routes'>): boolean {
  if (b.exchange !== e.exchange) return false;
  return topicMatches(b.routingKeyPattern, e.routingKey) || e.routes.some((r) => topicMatches(b.routingKeyPattern, r));
}

export function anyBindingMatches(bs: Binding[], e: Pick<QueueEvent, 'exchange' | 'routingKey' | 'routes'>): boolean {
  return bs.some((b) => bindingMatches(b, e));
}
