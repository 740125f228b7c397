/**
 * claimWork over fetch, so the long poll can be aborted: taskcluster-client takes no abort signal,
 * and a request left open after shutdown would still be answered with claims nobody runs. Signed
 * with Hawk exactly as taskcluster-client signs (sha256, certificate in `ext`).
 */
import hawk from 'hawk';
import type { Claim, Credentials } from './types';
import type { ClaimWorkQueue } from './protocols/claim-work';

/** The queue answers within its poll time (about 20 s); a hung connection gives up after this. */
const CLAIM_TIMEOUT_MS = 60_000;

/** An HTTP error in taskcluster-client's shape: statusCode, code, message. */
export class QueueCallError extends Error {
  constructor(
    message: string,
    readonly statusCode: number,
    readonly code: string,
  ) {
    super(message);
  }
}

function extFor(credentials: Credentials): string | undefined {
  if (!credentials.certificate) return undefined;
  const certificate = typeof credentials.certificate === 'string' ? JSON.parse(credentials.certificate) : credentials.certificate;
  return Buffer.from(JSON.stringify({ certificate })).toString('base64');
}

export function abortableClaimWork(rootUrl: string, credentials: Credentials): ClaimWorkQueue {
  const ext = extFor(credentials);
  return {
    async claimWork(taskQueueId, payload, signal) {
      const url = `${rootUrl.replace(/\/+$/, '')}/api/queue/v1/claim-work/${encodeURIComponent(taskQueueId).replace(/%2F/gi, '/')}`;
      const { header } = hawk.client.header(url, 'POST', { credentials: { id: credentials.clientId, key: credentials.accessToken, algorithm: 'sha256' }, ext });
      const timeout = AbortSignal.timeout(CLAIM_TIMEOUT_MS);
      const res = await fetch(url, {
        method: 'POST',
        headers: { authorization: header, 'content-type': 'application/json' },
        body: JSON.stringify(payload),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
      const text = await res.text();
      let body: { message?: string; code?: string; tasks?: Claim[] } = {};
      try {
        body = JSON.parse(text);
      } catch {
        // Not JSON (a proxy's error page): the status says enough.
      }
      if (!res.ok) throw new QueueCallError(body.message ?? `claimWork answered ${res.status}: ${text.slice(0, 200)}`, res.status, body.code ?? 'UnknownError');
      return { tasks: body.tasks ?? [] };
    },
  };
}
