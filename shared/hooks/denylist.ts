/**
 * Exchanges hooks may not bind, as Taskcluster's default `pulse.denylist` (services/hooks/config.yml):
 * each entry is a regular expression anchored at the start of the exchange name.
 */
export const HOOK_EXCHANGE_DENYLIST: readonly RegExp[] = [
  // A hook firing on task-created could create tasks without end.
  /^exchange\/taskcluster-queue\/v1\/task-created/,
  // Changes to hooks are internal and must not fire hooks.
  /^exchange\/taskcluster-hooks\/.*/,
];

export function deniedExchange(exchange: string): boolean {
  return HOOK_EXCHANGE_DENYLIST.some((re) => re.test(exchange));
}
