/**
 * A storage account's key, read through Azure Resource Manager's listKeys with the app's identity
 * (role Reader and Data Access on the account): how an identity account signs table SAS, since the
 * Table SDK signs only with the account key. A plain authenticated REST call, so no ARM SDK.
 */
import {
  TlsSettings,
  bearerTokenAuthenticationPolicy,
  createDefaultHttpClient,
  createHttpHeaders,
  createPipelineFromOptions,
  createPipelineRequest,
} from '@azure/core-rest-pipeline';
import type { TokenCredential } from '@azure/identity';

/** Microsoft.Storage's API version, the one infra/ deploys with. */
export const STORAGE_ARM_API_VERSION = '2023-05-01';

export interface ArmKeyOptions {
  /** /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Storage/storageAccounts/<account> */
  resourceId: string;
  /** https://management.azure.com, or a sovereign cloud's. */
  managementEndpoint: string;
  credential: TokenCredential;
  tlsOptions?: TlsSettings;
}

/** A function answering the account's first full-permission key, read anew on each call. */
export function armAccountKey(opts: ArmKeyOptions): () => Promise<string> {
  const pipeline = createPipelineFromOptions({ tlsOptions: opts.tlsOptions });
  pipeline.addPolicy(bearerTokenAuthenticationPolicy({ credential: opts.credential, scopes: `${opts.managementEndpoint}/.default` }), { phase: 'Sign' });
  const http = createDefaultHttpClient();
  const url = `${opts.managementEndpoint}${opts.resourceId}/listKeys?api-version=${STORAGE_ARM_API_VERSION}`;
  return async () => {
    const request = createPipelineRequest({ url, method: 'POST', headers: createHttpHeaders({ accept: 'application/json' }) });
    const response = await pipeline.sendRequest(http, request);
    const body = parse(response.bodyAsText);
    if (response.status !== 200) {
      const why = body?.error?.code ? `${body.error.code}: ${body.error.message}` : (response.bodyAsText ?? '').slice(0, 200);
      throw new Error(
        `listKeys of ${opts.resourceId} answered ${response.status} (${why}); does the app's identity have Reader and Data Access on the account?`,
      );
    }
    const key = (body?.keys ?? []).find((k: { value?: string; permissions?: string }) => k.value && String(k.permissions).toUpperCase() === 'FULL');
    if (!key) throw new Error(`listKeys of ${opts.resourceId} answered no key with full permissions`);
    return key.value as string;
  };
}

function parse(text: string | null | undefined): any {
  try {
    return JSON.parse(text ?? '');
  } catch {
    return undefined;
  }
}
