/**
 * Entity-group transactions (Azure's `$batch`), about five of a task lifecycle's twelve storage
 * calls, sent through the TableClient's own pipeline and HTTP client: its credential policy
 * (shared key, SAS or token), its retry policy and back-off, the same policies as every other
 * table call. `TableClient.submitTransaction` builds a whole new TableClient (pipeline and
 * generated operation client) inside every transaction and runs each action through that client
 * only to capture the request it would have sent, which doubled a transaction's client CPU
 * (docs/performance.md, "CPU per storage call").
 *
 * Hand-written here, because the SDK exports none of it (its package exports only its clients):
 * the multipart/mixed body (the same bytes the SDK writes, down to header order and blank lines,
 * which test/unit/table-transactions.test.ts compares against the SDK's own request), the
 * entity's JSON (the SDK's `serialize` rules: key names, Edm annotations for Date, bigint,
 * bytes and typed values), the one-partition check the SDK made before sending, and reading the
 * multipart answer (status and ETag of each sub-response; a refused action's Azure error code and
 * message). A refusal is thrown as the SDK throws it: a RestError with the refused action's
 * status and Azure error code.
 */
import { randomUUID } from 'node:crypto';
import { createHttpHeaders, createPipelineRequest, PipelineRequest, PipelineResponse, RestError } from '@azure/core-rest-pipeline';
import type { TableClient } from '@azure/data-tables';
import type { TableAction } from './port';

/** The TableClient's generated client, as far as these calls use it: it sends through the client's pipeline with its HTTP client. */
interface SendingClient {
  sendRequest(request: PipelineRequest): Promise<PipelineResponse>;
}

/**
 * The TableClient's generated operation client (`generatedClient`, private in the SDK): its
 * `sendRequest` runs the client's pipeline on the client's own HTTP client, as the SDK's own
 * transactions do.
 */
export function tableSenderOf(client: TableClient): SendingClient {
  const sender = (client as unknown as { generatedClient?: SendingClient }).generatedClient;
  // When the table's client is made (start-up makes every table's), not at the first transaction.
  if (typeof sender?.sendRequest !== 'function') throw new Error('@azure/data-tables: TableClient.generatedClient.sendRequest is gone (SDK upgrade?)');
  return sender;
}

const CRLF = '\r\n';
/** The Table service REST version the SDK sends with a transaction. */
const BATCH_VERSION = '2019-02-02';

/** A key inside a sub-request URL, as the SDK writes it: quotes doubled (OData), then percent-encoded. */
function key(s: string): string {
  return encodeURIComponent(s.replace(/'/g, "''"));
}

const EDM_TYPES = new Set(['Boolean', 'DateTime', 'Double', 'Guid', 'Int32', 'Int64', 'String', 'Binary']);
/** The SDK's entity key names on the wire. */
const WIRE_NAMES: Record<string, string> = { partitionKey: 'PartitionKey', rowKey: 'RowKey', etag: 'odata.etag', timestamp: 'Timestamp' };

/** An entity's JSON as the SDK's `serialize` makes it (its key names; Edm annotations where JSON alone would lose the type). */
export function entityJson(entity: Record<string, unknown>): string {
  const out: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(entity)) {
    const wire = WIRE_NAMES[name] ?? name;
    let type: string | undefined;
    let value = v;
    if (typeof v === 'bigint') [value, type] = [v.toString(), 'Edm.Int64'];
    else if (v instanceof Date) type = 'Edm.DateTime';
    else if (v instanceof Uint8Array) [value, type] = [Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64'), 'Edm.Binary'];
    else if (typeof v === 'object' && v !== null && (v as { value?: unknown }).value !== undefined && (v as { type?: unknown }).type !== undefined) {
      const typed = v as { value: unknown; type: string };
      if (!EDM_TYPES.has(typed.type)) throw new Error(`Unknown EDM type ${typeof typed.value}`);
      [value, type] = [typed.value, `Edm.${typed.type}`];
    } else if (v !== undefined && v !== null && typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
      throw new Error(`Unknown EDM type ${typeof v}`);
    }
    out[wire] = value;
    if (type) out[`${wire}@odata.type`] = type;
  }
  return JSON.stringify(out);
}

/** One action as a part of the change set: its request line, headers and body, as the SDK writes them. */
function part(a: TableAction, tableUrl: string, changeset: string): string {
  const head = `--${changeset}${CRLF}content-type: application/http${CRLF}content-transfer-encoding: binary${CRLF}${CRLF}`;
  if (a.op === 'create') {
    return (
      `${head}POST ${tableUrl} HTTP/1.1${CRLF}Content-Type: application/json;odata=nometadata${CRLF}Accept: application/json;odata=minimalmetadata${CRLF}` +
      `DataServiceVersion: 3.0${CRLF}Prefer: return-no-content${CRLF}${CRLF}${CRLF}${entityJson(a.entity)}`
    );
  }
  if (a.op === 'delete') {
    return (
      `${head}DELETE ${tableUrl}(PartitionKey='${key(a.partitionKey)}',RowKey='${key(a.rowKey)}') HTTP/1.1${CRLF}` +
      `Accept: application/json;odata=minimalmetadata${CRLF}DataServiceVersion: 3.0${CRLF}If-Match: ${a.etag ?? '*'}${CRLF}${CRLF}`
    );
  }
  const method = (a.mode ?? 'Replace') === 'Merge' ? 'PATCH' : 'PUT';
  const ifMatch = a.op === 'update' ? `If-Match: ${a.etag}${CRLF}` : '';
  return (
    `${head}${method} ${tableUrl}(PartitionKey='${key(a.entity.partitionKey)}',RowKey='${key(a.entity.rowKey)}') HTTP/1.1${CRLF}` +
    `Content-Type: application/json${CRLF}DataServiceVersion: 3.0${CRLF}Accept: application/json${CRLF}${ifMatch}${CRLF}${CRLF}${entityJson(a.entity)}`
  );
}

/** The multipart/mixed body of a transaction: one change set holding every action, in order. */
export function batchBody(actions: TableAction[], tableUrl: string, batchId: string, changesetId: string): string {
  const changeset = `changeset_${changesetId}`;
  const parts = [`--batch_${batchId}${CRLF}content-type: multipart/mixed; boundary=${changeset}${CRLF}${CRLF}`];
  for (const a of actions) parts.push(part(a, tableUrl, changeset));
  return `${parts.join(CRLF)}${CRLF}--${changeset}--${CRLF}--batch_${batchId}--${CRLF}`;
}

/** A refusal as the SDK throws it: Azure's message and error code (from `odata.error`) and the status. */
function refusal(json: string, status: number, res: PipelineResponse): RestError {
  let error: { code?: string; message?: { value?: string } } | undefined;
  try {
    error = (JSON.parse(json) as { 'odata.error'?: typeof error })['odata.error'];
  } catch {
    error = undefined;
  }
  return new RestError(error?.message?.value ?? 'Transaction Failed', { code: error?.code, statusCode: status, request: res.request, response: res });
}

/**
 * The index of the refused action, from Azure's message (`"1:The specified entity already
 * exists…"`), or undefined when the message does not say.
 */
export function failedIndexOf(err: unknown): number | undefined {
  const m = /^(\d+):/.exec((err as { message?: unknown })?.message as string);
  return m ? Number(m[1]) : undefined;
}

/** The ETag (or undefined) of each sub-response of an accepted transaction; throws the refused action's error. */
export function readBatchAnswer(res: PipelineResponse): (string | undefined)[] {
  const body = res.bodyAsText ?? '';
  if (res.status < 200 || res.status >= 300) throw refusal(body, res.status, res);
  // Each sub-response follows a change set boundary line; the last piece is the closing boundary.
  // A batch Azure could not read at all is answered with one response outside any change set.
  const parts = body.split('--changesetresponse_').slice(1, -1);
  return (parts.length ? parts : [body]).map((sub) => {
    const status = /HTTP\/1\.1 (\d+)/.exec(sub);
    if (!status) throw new RestError(`a transaction's answer holds a part without a status: ${sub}`, { statusCode: res.status, response: res });
    const code = Number(status[1]);
    if (code >= 300) {
      const json = /\{.*\}/s.exec(sub);
      throw refusal(json ? json[0] : '', code, res);
    }
    return /\r\nETag: ([^\r\n]*)/i.exec(sub)?.[1];
  });
}

/** Sends the entity-group transactions of one table through its TableClient's pipeline. */
export class TableTransactions {
  private readonly sender: SendingClient;
  /** `…/$batch`, followed by the connection's SAS when there is one (as the SDK places it). */
  private readonly batchUrl: string;
  /** The table's URL inside sub-requests: without the SAS, which only the outer request carries. */
  private readonly tableUrl: string;
  private readonly insecure: boolean;

  constructor(client: TableClient) {
    this.sender = tableSenderOf(client);
    const [base, sas] = client.url.split('?');
    const account = base.replace(/\/+$/, '');
    this.batchUrl = `${account}/$batch${sas ? `?${sas}` : ''}`;
    this.tableUrl = `${account}/${encodeURIComponent(client.tableName)}`;
    this.insecure = account.startsWith('http:');
  }

  /**
   * Runs `actions` as one transaction; returns each action's new ETag (undefined for deletes).
   * Azure checks its own limits (100 actions, 4 MiB, each row once) and refuses the whole
   * transaction with 400 or 413. One partition is checked here as well, as the SDK did: Azurite
   * lets a transaction across partitions through.
   */
  async submit(actions: TableAction[], abortSignal: AbortSignal): Promise<(string | undefined)[]> {
    const pk = actions.map((a) => (a.op === 'delete' ? a.partitionKey : a.entity.partitionKey));
    if (pk.some((k) => k !== pk[0])) {
      throw new RestError('All operations in a transaction must target the same partitionKey', {
        statusCode: 400,
        code: 'CommandsInBatchActOnDifferentPartitions',
      });
    }
    const batchId = randomUUID();
    const body = batchBody(actions, this.tableUrl, batchId, randomUUID());
    const headers = createHttpHeaders({
      accept: 'application/json',
      'x-ms-version': BATCH_VERSION,
      DataServiceVersion: '3.0;',
      MaxDataServiceVersion: '3.0;NetFx',
      'Content-Type': `multipart/mixed; boundary=batch_${batchId}`,
      'Accept-Charset': 'UTF-8',
      Connection: 'Keep-Alive',
    });
    const request = createPipelineRequest({ url: this.batchUrl, method: 'POST', body, headers, abortSignal, allowInsecureConnection: this.insecure });
    const etags = readBatchAnswer(await this.sender.sendRequest(request));
    if (etags.length !== actions.length) throw new RestError(`a transaction of ${actions.length} actions was answered with ${etags.length} results`);
    return actions.map((a, i) => (a.op === 'delete' ? undefined : etags[i]));
  }
}
