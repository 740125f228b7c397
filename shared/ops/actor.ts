/**
 * Who is acting in the current invocation, carried through async calls so that task history and
 * transition events can name the actor without every domain function passing it along.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface ActorContext {
  /** The authenticated clientId, `reaper` for the timer, unset until a caller authenticates. */
  actor?: string;
  /** Run transitions made in this context (the reaper reports it per pass). */
  transitions: number;
}

const store = new AsyncLocalStorage<ActorContext>();

export function runAs<T>(ctx: ActorContext, fn: () => T): T {
  return store.run(ctx, fn);
}

export function currentActor(): ActorContext | undefined {
  return store.getStore();
}
