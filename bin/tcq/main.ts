/**
 * `tcq`: the command line for operators. `tcq call <service> <method> ...` calls any method of any
 * service (from the generated API references) and prints the JSON answer; the commands on top
 * answer the usual questions with tables (--json for the answers as they came). Reads
 * TASKCLUSTER_ROOT_URL, TASKCLUSTER_CLIENT_ID, TASKCLUSTER_ACCESS_TOKEN (and
 * TASKCLUSTER_CERTIFICATE). See docs/cli.md.
 */
import { parseArgs } from 'node:util';
import { COMMANDS, Command, Flags, Output, call } from './commands';
import { OFFLINE, VERBS } from './verbs';
import { SECRET_COMMANDS } from './secrets';
import { TAIL_USAGE, tail } from './tail';
import { explain } from './errors';
import { closest } from './names';
import { readSettings, UsageError } from './settings';
import { safeText } from './safe';

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  payload: { type: 'string' },
  query: { type: 'string', multiple: true },
  run: { type: 'string' },
  until: { type: 'string' },
  reason: { type: 'string' },
  limit: { type: 'string' },
  exchange: { type: 'string', multiple: true },
  'task-group': { type: 'string' },
  task: { type: 'string' },
  'task-queue': { type: 'string' },
  route: { type: 'string' },
  pattern: { type: 'string' },
  id: { type: 'string' },
  keep: { type: 'boolean' },
  'expires-min': { type: 'string' },
  // taskcluster's CLI flags: task retrigger, group list, slugid generate, signin
  exact: { type: 'boolean' },
  all: { type: 'boolean' },
  running: { type: 'boolean' },
  failed: { type: 'boolean' },
  exception: { type: 'boolean' },
  complete: { type: 'boolean' },
  unscheduled: { type: 'boolean' },
  pending: { type: 'boolean' },
  nice: { type: 'boolean' },
  name: { type: 'string' },
  scope: { type: 'string', multiple: true },
  expires: { type: 'string' },
  check: { type: 'boolean' },
  csh: { type: 'boolean' },
} as const;

/** Every command that calls a service, and those that call none. */
const ALL: Command[] = [...COMMANDS, ...SECRET_COMMANDS, ...VERBS];

/** The command `positionals` name, its longest match (`slugid decode` before `slugid`), and the rest. */
function match<C extends { words: string[] }>(cmds: C[], positionals: string[]): [C, string[]] | undefined {
  const found = cmds.filter((c) => c.words.every((w, i) => positionals[i] === w)).sort((a, b) => b.words.length - a.words.length)[0];
  return found && [found, positionals.slice(found.words.length)];
}

const usageOf = (c: { words: string[]; args: string[] }) => `${c.words.join(' ')} ${c.args.map((a) => `<${a}>`).join(' ')}`.trim();

export function usage(): string {
  const rows = [
    [
      'call <service> [<method> [args...]]',
      'any method of queue, auth, object, index, hooks or secrets; prints its JSON answer (--payload, --query k=v); without a method, lists them',
    ],
    ['api <service> [<method> [args...]]', 'the same as call (taskcluster api)'],
    ...[...ALL, ...OFFLINE].map((c) => [usageOf(c), c.summary]),
    ['events tail [filters]', 'queue events as they happen, until Ctrl-C'],
  ];
  const w = Math.max(...rows.map((r) => r[0].length));
  return [
    'Usage: tcq <command> [--json]',
    '',
    ...rows.map(([c, s]) => `  ${c.padEnd(w)}  ${s}`),
    '',
    `  ${TAIL_USAGE}`,
    '',
    'Environment: TASKCLUSTER_ROOT_URL (required), TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN',
    '(without them, calls get the anonymous role), TASKCLUSTER_CERTIFICATE for temporary credentials.',
    'Exit status: 0 done, 1 the service refused or failed, 2 a usage mistake. See docs/cli.md.',
  ].join('\n');
}

export interface Io {
  out: (s: string) => void;
  err: (s: string) => void;
  /** Aborted on Ctrl-C (events tail). */
  stop?: AbortSignal;
}

const stdio: Io = { out: (s) => process.stdout.write(s + '\n'), err: (s) => process.stderr.write(s + '\n') };

export async function main(argv: string[] = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env, terminal: Io = stdio): Promise<number> {
  // Everything printed may carry the service's text (task data): no control character gets through.
  const io: Io = { out: (s) => terminal.out(safeText(s)), err: (s) => terminal.err(safeText(s)), stop: terminal.stop };
  let positionals: string[];
  let flags: Flags;
  try {
    const parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
    positionals = parsed.positionals;
    flags = parsed.values as Flags;
  } catch (err) {
    io.err(`error: ${(err as Error).message}\n\n${usage()}`);
    return 2;
  }
  if (flags.help || positionals.length === 0) {
    (flags.help ? io.out : io.err)(usage());
    return flags.help ? 0 : 2;
  }
  const [first, second] = positionals;
  const what = positionals.slice(0, first === 'call' || first === 'api' ? 3 : 2).join(' ');
  const offline = match(OFFLINE, positionals);
  if (offline) {
    const [cmd, rest] = offline;
    const args = cmd.joined && rest.length ? [rest.join(' ')] : rest;
    if (args.length !== cmd.args.length) {
      io.err(`error: usage: tcq ${usageOf(cmd)}  (${cmd.summary})`);
      return 2;
    }
    try {
      const output = cmd.run(args, flags);
      io.out(flags.json ? JSON.stringify(output.json, null, 2) : output.text);
      return 0;
    } catch (err) {
      io.err(`error: ${(err as Error).message}`);
      return err instanceof UsageError ? 2 : 1;
    }
  }
  let settings;
  try {
    settings = readSettings(env);
  } catch (err) {
    io.err(`error: ${(err as Error).message}`);
    return 2;
  }
  try {
    let output: Output;
    if (first === 'call' || first === 'api') output = await call(settings, positionals.slice(1), flags);
    else if (first === 'events' && second === 'tail') {
      const ctl = new AbortController();
      const onSigint = () => ctl.abort();
      if (!io.stop) process.once('SIGINT', onSigint);
      try {
        await tail(settings, flags, io.stop ?? ctl.signal, io.out, io.err);
      } finally {
        process.off('SIGINT', onSigint);
      }
      return 0;
    } else {
      const found = match(ALL, positionals);
      if (!found) {
        const names = [...[...ALL, ...OFFLINE].map((c) => c.words.join(' ')), 'events tail', 'call', 'api'];
        const near = closest(`${first} ${second ?? ''}`.trim(), names);
        throw new UsageError(
          `no command '${`${first} ${second ?? ''}`.trim()}'${near.length ? `; did you mean ${near.map((n) => `'${n}'`).join(', ')}?` : ''} (tcq --help lists them)`,
        );
      }
      const [cmd, rest] = found;
      if (rest.length !== cmd.args.length) throw new UsageError(`usage: tcq ${usageOf(cmd)}  (${cmd.summary})`);
      output = await cmd.run(settings, rest, flags, io);
    }
    if (flags.json) io.out(JSON.stringify(output.json, null, 2));
    else if (output.text !== undefined) io.out(output.text);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`error: ${err.message}`);
      return 2;
    }
    io.err(`error: ${explain(err, settings, what)}`);
    return 1;
  }
}
