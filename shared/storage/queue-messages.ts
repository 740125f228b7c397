/**
 * Queue message put and delete, six of a lifecycle's twelve storage calls, sent through the Queue
 * SDK's own pipeline (its shared-key signer, its retry policy and back-off, its XML response
 * parsing, the same policies as every other queue call) but not through its generated operation
 * client: that client's request and response mapping cost more CPU than the rest of the call
 * (docs/performance.md, "CPU per storage call"). The other queue calls stay on the SDK's client.
 */
import { createDefaultHttpClient, createHttpHeaders, createPipelineRequest, HttpClient, PipelineResponse, RestError } from '@azure/core-rest-pipeline';
import type { QueueServiceClient } from '@azure/storage-queue';

/** A core-rest-pipeline pipeline, as far as these calls use it. */
interface SendingPipeline {
  sendRequest(httpClient: HttpClient, request: ReturnType<typeof createPipelineRequest>): Promise<PipelineResponse>;
}

/** The Queue service client's internals these calls share: its pipeline and its REST API version. */
interface QueueContext {
  pipeline: SendingPipeline;
  version: string;
}

/**
 * One keep-alive HTTP client (one socket pool) for these calls of every account in the process;
 * the SDK's own calls use the SDK's.
 */
let sharedHttp: HttpClient | undefined;

/**
 * The queue service client's core-rest-pipeline context. The storage SDKs build the pipeline once
 * per service client and every queue client made from it shares it; they expose it only to
 * subclasses (`storageClientContext`).
 */
export function queueContextOf(service: QueueServiceClient): QueueContext {
  return (service as unknown as { storageClientContext: QueueContext }).storageClientContext;
}

/** A refused call as the SDK reports it: `statusCode` and Azure's error code (`x-ms-error-code`). */
function refusal(res: PipelineResponse): RestError {
  const code = res.headers.get('x-ms-error-code') ?? undefined;
  const detail = (res as { parsedBody?: { Message?: string } }).parsedBody?.Message;
  return new RestError(`${code ?? `status ${res.status}`}${detail ? `: ${detail}` : ''}`, {
    statusCode: res.status,
    code,
    request: res.request,
    response: res,
  });
}

export class QueueMessageCalls {
  private readonly context: QueueContext;
  private readonly http: HttpClient;
  /** Azurite serves plain http; the SDK's own calls allow it there too. */
  private readonly insecure: boolean;

  constructor(service: QueueServiceClient) {
    this.context = queueContextOf(service);
    this.http = sharedHttp ??= createDefaultHttpClient();
    this.insecure = service.url.startsWith('http:');
  }

  private async send(method: 'POST' | 'DELETE', url: string, abortSignal: AbortSignal, body?: string): Promise<PipelineResponse> {
    const headers = createHttpHeaders({ 'x-ms-version': this.context.version, accept: 'application/xml' });
    if (body !== undefined) headers.set('content-type', 'application/xml; charset=utf-8');
    const request = createPipelineRequest({ url, method, body, headers, abortSignal, allowInsecureConnection: this.insecure });
    return this.context.pipeline.sendRequest(this.http, request);
  }

  /** Put Message: `text` is the message as stored (base64 here: nothing in it needs XML escaping). */
  async put(queueUrl: string, text: string, visibilityS: number, ttlS: number, abortSignal: AbortSignal): Promise<{ messageId: string; popReceipt: string }> {
    if (!/^[A-Za-z0-9+/=]*$/.test(text)) throw new Error('a queue message is sent base64-encoded');
    const body = `<?xml version="1.0" encoding="utf-8"?><QueueMessage><MessageText>${text}</MessageText></QueueMessage>`;
    const res = await this.send('POST', `${queueUrl}/messages?visibilitytimeout=${visibilityS}&messagettl=${ttlS}`, abortSignal, body);
    if (res.status !== 201) throw refusal(res);
    // The SDK's deserialization policy parsed <QueueMessagesList><QueueMessage>…</QueueMessage></QueueMessagesList>.
    const listed = (res as { parsedBody?: { QueueMessage?: unknown } }).parsedBody?.QueueMessage;
    const m = (Array.isArray(listed) ? listed[0] : listed) as { MessageId?: string; PopReceipt?: string } | undefined;
    if (!m?.MessageId || !m.PopReceipt)
      throw new RestError(`Put Message answered without a message id: ${res.bodyAsText}`, { statusCode: res.status, response: res });
    return { messageId: m.MessageId, popReceipt: m.PopReceipt };
  }

  /** Delete Message; a refusal (404 gone, 400 receipt mismatch, …) is thrown as the SDK throws it. */
  async delete(queueUrl: string, messageId: string, popReceipt: string, abortSignal: AbortSignal): Promise<void> {
    const res = await this.send('DELETE', `${queueUrl}/messages/${encodeURIComponent(messageId)}?popreceipt=${encodeURIComponent(popReceipt)}`, abortSignal);
    if (res.status !== 204) throw refusal(res);
  }
}
