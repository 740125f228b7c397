/**
 * Start-up storage failures in words an operator can act on: the setting to fix
 * (QUEUE_STORAGE_CONNECTION), what was tried (the endpoint, never the key), and the likely cause.
 */

/** Network error codes that mean "the endpoint could not be reached at all". */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']);
const NOT_FOUND = new Set(['ENOTFOUND', 'EAI_AGAIN']);

const SHAPES =
  "expected 'DefaultEndpointsProtocol=https;AccountName=<name>;AccountKey=<key>;EndpointSuffix=core.windows.net', " +
  "'UseDevelopmentStorage=true' (Azurite on its default ports), or 'memory:' (in memory, for tests)";

/** A URL without its query string (a SAS signature must not reach the terminal). */
function bare(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return url.split('?')[0];
  }
}

/** The connection string with its secrets replaced, for "what was tried". */
export function redactConnection(connectionString: string): string {
  return connectionString.replace(/(AccountKey|SharedAccessSignature)=[^;]*/gi, '$1=***');
}

interface StorageLikeError {
  name?: string;
  message?: string;
  code?: string;
  statusCode?: number;
  request?: { url?: string; method?: string };
  cause?: unknown;
}

/**
 * The one-paragraph message for an error thrown while opening storage, or undefined when it is not
 * a storage error. `source` says where the connection came from (the setting, or embedded Azurite).
 */
export function describeStorageError(err: unknown, connectionString: string, source = 'QUEUE_STORAGE_CONNECTION'): string | undefined {
  const e = (err ?? {}) as StorageLikeError;
  const message = String(e.message ?? err).split('\n')[0];
  const tried = e.request?.url ? `${e.request.method ?? 'GET'} ${bare(e.request.url)}` : undefined;
  const head = `${source} (${redactConnection(connectionString)})`;
  if ((err as Error)?.name === 'TypeError' && /Invalid URL/i.test(message)) return `${head} is not a storage connection string: ${SHAPES}.`;
  if (/connection string|AccountName|AccountKey/i.test(message) && !e.request) return `${head} is not usable: ${message}; ${SHAPES}.`;
  if (e.code && UNREACHABLE.has(e.code))
    return `${head}: nothing answered at ${tried ?? 'the storage endpoint'} (${e.code}). Is the storage emulator running? Unset QUEUE_STORAGE_CONNECTION to let \`npm start\` run its own Azurite.`;
  if (e.code && NOT_FOUND.has(e.code))
    return `${head}: the host of ${tried ?? 'the storage endpoint'} was not found (${e.code}). Check AccountName and EndpointSuffix.`;
  if (e.statusCode === 403)
    return `${head}: the storage account refused ${tried ?? 'the request'} (403${e.code ? ` ${e.code}` : ''}). Check AccountKey (or the SAS) and that it belongs to this account.`;
  if (e.name === 'RestError' || e.request) return `${head}: ${tried ? `${tried} failed` : 'storage failed'}: ${message}`;
  return undefined;
}
