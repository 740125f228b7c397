/**
 * `tcq secret ...`: the Secrets service as tables and plain answers. `list` shows names and expiry
 * only (the service's listSecretsWithExpiry: no value is read); `get` prints the one value asked
 * for; `set` takes the value from --payload (a file or stdin keeps it out of the shell's history).
 */
import { clientFor } from './services';
import { fields, table, Row } from './table';
import { UsageError } from './settings';
import { MAX_FROM_NOW_YEARS, fromNow } from './bounds';
import { Command, pages, readPayload } from './commands';

/** How far ahead `--expires` may reach: further is a typo. */
const MAX_EXPIRES_DAYS = MAX_FROM_NOW_YEARS * 366;

/** `--expires`: a Taskcluster duration from now (30d, '1 year') or an ISO time (which may be past: the secret is then expired). */
export function secretExpires(raw: string | undefined, now = new Date()): string {
  if (!raw) throw new UsageError('a secret needs --expires: a duration (30d, 2 hours, 1 year) or an ISO time');
  if (/^\d{4}-\d{2}-\d{2}T/.test(raw)) {
    const t = Date.parse(raw);
    if (Number.isNaN(t)) throw new UsageError(`--expires is not a valid ISO time: '${raw}'`);
    return new Date(t).toJSON();
  }
  return fromNow('--expires', raw, MAX_EXPIRES_DAYS, now).toJSON();
}

export const SECRET_COMMANDS: Command[] = [
  {
    words: ['secret', 'list'],
    args: [],
    summary: 'every secret: name, expiry and whether it has expired (never a value)',
    async run(settings) {
      const client = await clientFor('secrets', settings);
      const secrets = await pages<{ name: string; expires: string; expired: boolean }>(
        (continuationToken) => client.listSecretsWithExpiry(continuationToken ? { continuationToken } : {}),
        'secrets',
      );
      const rows: Row[] = secrets.map((s) => ({ name: s.name, expires: s.expires, state: s.expired ? 'expired' : 'live' }));
      return { json: { secrets }, text: table(rows, ['name', 'expires', 'state']) };
    },
  },
  {
    words: ['secret', 'get'],
    args: ['name'],
    summary: "a secret's value (JSON) and expiry",
    async run(settings, [name]) {
      const res = await (await clientFor('secrets', settings)).get(name);
      return { json: res, text: `${fields({ name, expires: res.expires })}\n\n${JSON.stringify(res.secret, null, 2)}` };
    },
  },
  {
    words: ['secret', 'set'],
    args: ['name'],
    summary: 'creates or replaces a secret: --payload JSON object|@file|- (the value), --expires 30d|ISO time',
    async run(settings, [name], flags) {
      const secret = readPayload(flags.payload);
      if (typeof secret !== 'object' || secret === null || Array.isArray(secret))
        throw new UsageError('a secret is a JSON object: --payload \'{"token": "..."}\', --payload @file.json or --payload - (stdin)');
      const expires = secretExpires(flags.expires as string | undefined);
      await (await clientFor('secrets', settings)).set(name, { secret, expires });
      return { json: { name, expires }, text: fields({ name, expires }) };
    },
  },
  {
    words: ['secret', 'remove'],
    args: ['name'],
    summary: 'deletes a secret',
    async run(settings, [name]) {
      await (await clientFor('secrets', settings)).remove(name);
      return { json: { name, removed: true }, text: `removed ${name}` };
    },
  },
];
