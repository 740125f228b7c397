/**
 * Entity-group transactions are sent through the TableClient's pipeline by the adapter's own code
 * (shared/storage/table-transactions.ts), not by `TableClient.submitTransaction`. What the SDK
 * would have sent and how it reads the answer are the reference: for the same actions both send
 * the same request (method, URL, headers, multipart body), and both read the same answers into
 * the same ETags and the same errors. The SDK internals the module reaches are pinned too, so an
 * SDK upgrade that renames them fails here, not in production.
 */
import { createHttpHeaders, PipelineRequest, PipelineResponse, RestError } from '@azure/core-rest-pipeline';
import { TableClient, TransactionAction } from '@azure/data-tables';
import { connectionStringFor } from '../../shared/local/azurite';
import { failedIndexOf, TableTransactions, tableSenderOf } from '../../shared/storage/table-transactions';
import type { TableAction } from '../../shared/storage/port';

/** No network: a policy at the end of the pipeline answers every request. */
const ACCOUNT_KEY = connectionStringFor({ blob: 1, queue: 2, table: 3 });
const SAS =
  'TableEndpoint=https://acct.table.core.windows.net/;SharedAccessSignature=sv=2022-11-02&ss=t&srt=sco&sp=rwdlacu&se=2030-01-01T00:00:00Z&spr=https&sig=abc%3D';

interface Seen {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** A TableClient whose pipeline records each request after signing and answers it with `answer`. */
function answering(connection: string, answer: (r: PipelineRequest) => Omit<PipelineResponse, 'request'>): { client: TableClient; seen: Seen[] } {
  const client = TableClient.fromConnectionString(connection, 'tasks', { allowInsecureConnection: true, retryOptions: { maxRetries: 0 } });
  const seen: Seen[] = [];
  client.pipeline.addPolicy(
    {
      name: 'answer',
      async sendRequest(request) {
        seen.push({ method: request.method, url: request.url, headers: Object.fromEntries(request.headers), body: String(request.body) });
        return { ...answer(request), request };
      },
    },
    { afterPhase: 'Sign' },
  );
  return { client, seen };
}

/** The boundary ids (random per transaction) and the per-attempt headers, fixed for comparison. */
function normal(s: Seen): Omit<Seen, 'headers'> & { headers: Record<string, string>; signed: boolean } {
  const ids = new Map<string, string>();
  const fix = (t: string) =>
    t.replace(/(batch|changeset)_([0-9a-f-]{36})/g, (_, kind: string, id: string) => `${kind}_${ids.get(id) ?? (ids.set(id, `#${ids.size}`), ids.get(id))}`);
  const headers = Object.fromEntries(
    Object.entries(s.headers)
      .filter(([k]) => !['x-ms-client-request-id', 'x-ms-date', 'authorization', 'content-length'].includes(k.toLowerCase()))
      .map(([k, v]) => [k, fix(v)]),
  );
  return { method: s.method, url: s.url, headers, body: fix(s.body), signed: /^SharedKeyLite /.test(s.headers.authorization ?? '') };
}

function sdkActionOf(a: TableAction): TransactionAction {
  if (a.op === 'create') return ['create', a.entity];
  if (a.op === 'delete') return ['delete', { partitionKey: a.partitionKey, rowKey: a.rowKey }];
  if (a.op === 'upsert') return ['upsert', a.entity, a.mode ?? 'Replace'];
  return ['update', a.entity, a.mode ?? 'Replace', { etag: a.etag }];
}

/** An accepted transaction's answer, one sub-response per action, as Azure writes it. */
function accepted(n: number): Omit<PipelineResponse, 'request'> {
  const cs = 'changesetresponse_0b6e9a8e-5f0a-4c59-9a53-0d3c5a2b6c11';
  const parts = Array.from(
    { length: n },
    (_, i) =>
      `--${cs}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 204 No Content\r\nX-Content-Type-Options: nosniff\r\n` +
      `Cache-Control: no-cache\r\nDataServiceVersion: 3.0;\r\nETag: W/"datetime'2026-01-01T00%3A00%3A0${i}.0000000Z'"\r\n\r\n`,
  );
  const bodyAsText = `--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=${cs}\r\n\r\n${parts.join('\r\n')}\r\n--${cs}--\r\n--batchresponse_1--\r\n`;
  return { status: 202, headers: createHttpHeaders({ 'content-type': 'multipart/mixed; boundary=batchresponse_1' }), bodyAsText };
}

/** A refused transaction's answer: the refused action's sub-response only, as Azure writes it. */
function refused(status: number, code: string, message: string): Omit<PipelineResponse, 'request'> {
  const cs = 'changesetresponse_0b6e9a8e-5f0a-4c59-9a53-0d3c5a2b6c11';
  const error = JSON.stringify({ 'odata.error': { code, message: { lang: 'en-US', value: message } } });
  const bodyAsText =
    `--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=${cs}\r\n\r\n--${cs}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n` +
    `HTTP/1.1 ${status} Refused\r\nContent-ID: 2\r\nDataServiceVersion: 3.0;\r\nContent-Type: application/json;odata=minimalmetadata;charset=utf-8\r\n\r\n${error}\r\n` +
    `--${cs}--\r\n--batchresponse_1--\r\n`;
  return { status: 202, headers: createHttpHeaders({ 'content-type': 'multipart/mixed; boundary=batchresponse_1' }), bodyAsText };
}

/** Keys and values of every kind the SDK treats specially. */
const ODD = "it's a key: ü %20 (x)";
const ACTIONS: TableAction[] = [
  {
    op: 'create',
    entity: {
      partitionKey: ODD,
      rowKey: "row'1",
      s: 'line\r\n--changeset_x "quoted" ü',
      i: 3,
      f: 1.5,
      b: false,
      d: new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 678)),
      big: 9007199254740993n,
      bytes: new Uint8Array([0, 1, 254, 255]),
      typed: { value: '12', type: 'Int64' },
      guid: { value: '0b6e9a8e-5f0a-4c59-9a53-0d3c5a2b6c11', type: 'Guid' },
      gone: undefined,
    },
  },
  { op: 'upsert', entity: { partitionKey: ODD, rowKey: 'replace', v: 1 } },
  { op: 'upsert', entity: { partitionKey: ODD, rowKey: 'merge', v: 2 }, mode: 'Merge' },
  { op: 'update', entity: { partitionKey: ODD, rowKey: 'u1', v: 3, etag: 'ignored', timestamp: 'x' }, etag: `W/"datetime'2026-01-01T00%3A00%3A00Z'"` },
  { op: 'update', entity: { partitionKey: ODD, rowKey: 'u2', v: 4 }, etag: '*', mode: 'Merge' },
  { op: 'delete', partitionKey: ODD, rowKey: 'd/1?' },
];

async function both(connection: string, actions: TableAction[], answer: () => Omit<PipelineResponse, 'request'>) {
  const sdk = answering(connection, answer);
  const ours = answering(connection, answer);
  const sdkResult = await sdk.client.submitTransaction(actions.map(sdkActionOf), {}).then(
    (r) => actions.map((a, i) => (a.op === 'delete' ? undefined : r.subResponses[i]?.etag)),
    (e: unknown) => e,
  );
  const ourResult = await new TableTransactions(ours.client).submit(actions, new AbortController().signal).catch((e: unknown) => e);
  return { sdk: { seen: sdk.seen, result: sdkResult }, ours: { seen: ours.seen, result: ourResult } };
}

describe('the transaction request is the one the SDK sends', () => {
  test.each([
    ['an account-key connection', ACCOUNT_KEY],
    ['a SAS connection', SAS],
  ])('with %s, every action kind, odd keys and every value type', async (_, connection) => {
    const r = await both(connection, ACTIONS, () => accepted(ACTIONS.length));
    expect(r.ours.seen).toHaveLength(1);
    expect(r.sdk.seen).toHaveLength(1);
    expect(normal(r.ours.seen[0])).toEqual(normal(r.sdk.seen[0]));
    expect([normal(r.ours.seen[0]).signed, r.ours.seen[0].url]).toEqual(
      connection === SAS ? [false, expect.stringMatching(/\/\$batch\?sv=.*&sig=/)] : [true, expect.stringMatching(/\/\$batch$/)],
    );
    expect(r.ours.result).toEqual(r.sdk.result);
    expect(r.ours.result).toEqual([...[0, 1, 2, 3, 4].map((i) => `W/"datetime'2026-01-01T00%3A00%3A0${i}.0000000Z'"`), undefined]);
  });

  test('a guarded delete carries its ETag (the SDK transaction API always sent *)', async () => {
    const { client, seen } = answering(ACCOUNT_KEY, () => accepted(1));
    await new TableTransactions(client).submit([{ op: 'delete', partitionKey: 'p', rowKey: 'r', etag: 'W/"x"' }], new AbortController().signal);
    expect(seen[0].body).toContain('\r\nIf-Match: W/"x"\r\n');
  });
});

describe('answers are read as the SDK reads them', () => {
  test.each([
    [409, 'EntityAlreadyExists', '1:The specified entity already exists.\nRequestId:x'],
    [412, 'UpdateConditionNotSatisfied', '1:The update condition specified in the request was not satisfied.'],
    [404, 'ResourceNotFound', '1:The specified resource does not exist.'],
  ])('a refused action: status %d, code %s', async (status, code, message) => {
    const r = await both(ACCOUNT_KEY, ACTIONS.slice(0, 2), () => refused(status, code, message));
    expect(r.ours.result).toBeInstanceOf(RestError);
    expect(r.ours.result).toMatchObject({ statusCode: status, code, message });
    expect(r.sdk.result).toMatchObject({ statusCode: status, code, message });
    expect(failedIndexOf(r.ours.result)).toBe(1);
  });

  test('a refused transaction (its status on the whole request)', async () => {
    const body = JSON.stringify({
      'odata.error': { code: 'InvalidInput', message: { value: '0:The batch request operation exceeds the maximum 100 changes per change set.' } },
    });
    const answer = () => ({ status: 400, headers: createHttpHeaders({ 'content-type': 'application/json' }), bodyAsText: body });
    const r = await both(ACCOUNT_KEY, ACTIONS.slice(0, 2), answer);
    expect(r.ours.result).toMatchObject({ statusCode: 400, code: 'InvalidInput', message: expect.stringMatching(/^0:The batch request/) });
    expect(r.sdk.result).toMatchObject({ statusCode: 400, code: 'InvalidInput', message: (r.ours.result as Error).message });
  });

  test('a batch refused outside any change set keeps its status and code (the SDK would have read no results)', async () => {
    const error = JSON.stringify({ 'odata.error': { code: 'InvalidInput', message: { value: '99:One of the request inputs is not valid.' } } });
    const bodyAsText =
      `--batchresponse_1\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\nHTTP/1.1 400 Bad Request\r\n` +
      `Content-Type: application/json;odata=minimalmetadata;charset=utf-8\r\n\r\n${error}\r\n--batchresponse_1--\r\n`;
    const { client } = answering(ACCOUNT_KEY, () => ({
      status: 202,
      headers: createHttpHeaders({ 'content-type': 'multipart/mixed; boundary=batchresponse_1' }),
      bodyAsText,
    }));
    await expect(new TableTransactions(client).submit(ACTIONS.slice(0, 2), new AbortController().signal)).rejects.toMatchObject({
      statusCode: 400,
      code: 'InvalidInput',
    });
  });

  test('an answer with fewer results than actions is an error, not missing ETags', async () => {
    const { client } = answering(ACCOUNT_KEY, () => accepted(1));
    await expect(new TableTransactions(client).submit(ACTIONS.slice(0, 2), new AbortController().signal)).rejects.toThrow(/2 actions was answered with 1/);
  });
});

test("the SDK internals the module uses: the TableClient's generated client sends through the client's own pipeline", () => {
  const client = TableClient.fromConnectionString(ACCOUNT_KEY, 'tasks', { allowInsecureConnection: true });
  const sender = tableSenderOf(client) as unknown as { sendRequest: unknown; pipeline: unknown };
  expect(typeof sender?.sendRequest).toBe('function');
  expect(sender.pipeline).toBe(client.pipeline);
  // Renamed by an SDK upgrade: the table's client fails when it is made, not at a first transaction.
  Object.defineProperty(client, 'generatedClient', { value: undefined });
  expect(() => new TableTransactions(client)).toThrow(/generatedClient/);
});
