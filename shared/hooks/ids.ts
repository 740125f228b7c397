/**
 * Hook identifiers. Taskcluster allows 1,000 characters; here both ids are table keys (a hookId's
 * `/` takes three characters escaped, and a fire's partition key holds both ids), and Table
 * Storage keys hold 1 KiB: 64 characters each keeps every key under 300.
 */
export const MAX_HOOK_ID_LENGTH = 64;
