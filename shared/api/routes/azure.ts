/**
 * Auth's Azure credentials (Taskcluster's azureAccounts, azureTables, azureTableSAS, azureContainers,
 * azureContainerSAS): short SAS for one table or container of the accounts the deployment names
 * (QUEUE_AZURE_ACCOUNTS), read-only or read-write, so a task reaches its own storage without the
 * account's key.
 */
import { ApiRequest, ApiResponse, RouteDef, ok } from '../types';
import { badUrlParam, notFound } from '../../errors';
import type { AccessLevel } from '../../storage/delegated-accounts';

/** Azure's table names. */
const TABLE = /^[A-Za-z][A-Za-z0-9]{2,62}$/;
/** Azure's container names. */
const CONTAINER = /^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/;
const LEVELS: AccessLevel[] = ['read-only', 'read-write'];

const azure = (r: Omit<RouteDef, 'service' | 'stability'>): RouteDef => ({ ...r, service: 'auth', stability: 'stable' });

function checked(req: { services: { delegatedAccounts: { has(n: string): boolean } }; params: Record<string, string> }, kind: 'table' | 'container') {
  const { account, level } = req.params;
  const name = kind === 'table' ? req.params.table : req.params.container;
  if (!(kind === 'table' ? TABLE : CONTAINER).test(name)) throw badUrlParam(kind, name, kind === 'table' ? TABLE : CONTAINER);
  if (!LEVELS.includes(level as AccessLevel)) throw badUrlParam('level', level, /^(read-only|read-write)$/);
  if (!req.services.delegatedAccounts.has(account)) throw notFound(`Account '${account}' not found, can't delegate access`);
  return { account, name, level: level as AccessLevel };
}

/** One page of an account's tables or containers, with Azure's continuation. */
async function listed(req: ApiRequest, what: 'tables' | 'containers'): Promise<ApiResponse> {
  const accounts = req.services.delegatedAccounts;
  if (!accounts.has(req.params.account)) throw notFound(`Account '${req.params.account}' not found`);
  const list = what === 'tables' ? accounts.listTables.bind(accounts) : accounts.listContainers.bind(accounts);
  const page = await list(req.params.account, req.query.continuationToken);
  return ok({ [what]: page.names, ...(page.continuation ? { continuationToken: page.continuation } : {}) });
}

export const azureRoutes: RouteDef[] = [
  azure({
    name: 'azureAccounts',
    title: 'List Accounts Managed by Auth',
    description: 'The Azure storage accounts this deployment hands out table and container SAS for.',
    output: 'azure-account-list-response',
    method: 'GET',
    route: '/azure/accounts',
    scopes: 'auth:azure-table:list-accounts',
    handler: async (req) => ok({ accounts: req.services.delegatedAccounts.names() }),
  }),
  azure({
    name: 'azureTables',
    title: 'List Tables in an Account Managed by Auth',
    description: 'The tables of an account, a page at a time (`continuationToken`).',
    output: 'azure-table-list-response',
    method: 'GET',
    route: '/azure/<account>/tables',
    query: ['continuationToken'],
    scopes: 'auth:azure-table:list-tables:<account>',
    handler: (req) => listed(req, 'tables'),
  }),
  azure({
    name: 'azureTableSAS',
    title: 'Get Shared-Access-Signature for Azure Table',
    description:
      'A shared access signature (SAS) string for one Azure Table Storage table, valid 25 minutes. `level` is `read-write` or ' +
      '`read-only`; read-write creates the table if it does not exist.',
    output: 'azure-table-access-response',
    method: 'GET',
    route: '/azure/<account>/table/<table>/<level>',
    scopes: {
      if: 'levelIsReadOnly',
      then: { AnyOf: ['auth:azure-table:read-only:<account>/<table>', 'auth:azure-table:read-write:<account>/<table>'] },
      else: 'auth:azure-table:read-write:<account>/<table>',
    },
    handler: async (req) => {
      const { account, name, level } = checked(req, 'table');
      await req.authorize({ account, table: name, level, levelIsReadOnly: level === 'read-only' });
      const r = await req.services.delegatedAccounts.tableSas(account, name, level);
      return ok({ sas: r.sas, expiry: r.expiry.toJSON() });
    },
  }),
  azure({
    name: 'azureContainers',
    title: 'List containers in an Account Managed by Auth',
    description: 'The blob containers of an account, a page at a time (`continuationToken`).',
    output: 'azure-container-list-response',
    method: 'GET',
    route: '/azure/<account>/containers',
    query: ['continuationToken'],
    scopes: 'auth:azure-container:list-containers:<account>',
    handler: (req) => listed(req, 'containers'),
  }),
  azure({
    name: 'azureContainerSAS',
    title: 'Get Shared-Access-Signature for Azure Container',
    description:
      'A shared access signature (SAS) string for one Azure Blob Storage container, valid 25 minutes. `level` is `read-write` or ' +
      '`read-only`; read-write creates the container if it does not exist.',
    output: 'azure-container-response',
    method: 'GET',
    route: '/azure/<account>/containers/<container>/<level>',
    scopes: {
      if: 'levelIsReadOnly',
      then: { AnyOf: ['auth:azure-container:read-only:<account>/<container>', 'auth:azure-container:read-write:<account>/<container>'] },
      else: 'auth:azure-container:read-write:<account>/<container>',
    },
    handler: async (req) => {
      const { account, name, level } = checked(req, 'container');
      await req.authorize({ account, container: name, level, levelIsReadOnly: level === 'read-only' });
      const r = await req.services.delegatedAccounts.containerSas(account, name, level);
      return ok({ sas: r.sas, expiry: r.expiry.toJSON() });
    },
  }),
];
