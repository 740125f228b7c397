/**
 * Whether the caller of an invocation hung up. A host that can tell (the local host) registers a
 * signal per invocation; a long poll (claimWork) stops waiting on it, so a worker that aborted its
 * poll at shutdown is not handed claims it will never receive. Where the host cannot tell, the
 * signal is absent and the poll runs its full time.
 */
import type { InvocationContext } from '@azure/functions';

const signals = new WeakMap<InvocationContext, AbortSignal>();

export function setClientGone(context: InvocationContext, signal: AbortSignal): void {
  signals.set(context, signal);
}

export function clientGone(context: InvocationContext): AbortSignal | undefined {
  return signals.get(context);
}
