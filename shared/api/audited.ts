/**
 * The audit history's entry for a change a handler has just made, naming its caller
 * (shared/audit/history.ts).
 */
import type { ApiRequest } from './types';
import { ANONYMOUS_CALLER, AuditEntityType, recordAudit } from '../audit/history';

export async function audited(req: ApiRequest, entityType: AuditEntityType, entityId: string, actionType: string): Promise<void> {
  const clientId = (await req.caller()).clientId ?? ANONYMOUS_CALLER;
  await recordAudit(req.services, { entityType, entityId, clientId, actionType });
}
