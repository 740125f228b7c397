/**
 * Registers the Azure Functions of the route table (one per endpoint; see azureRegistrations). No logic lives here.
 */
import { app } from '@azure/functions';
import { makeHandler } from '../shared/api/http';
import { azureRegistrations } from '../shared/api/router';
import { runtimeApp } from '../shared/runtime';

for (const r of azureRegistrations(runtimeApp.routes)) {
  app.http(r.name, {
    methods: r.methods,
    authLevel: 'anonymous',
    route: r.route,
    handler: makeHandler(r.def, runtimeApp.services),
  });
}

// Queued operator index writes go out before the worker process exits (shared/ops/indexes.ts).
app.hook.appTerminate(() => runtimeApp.close());
