/**
 * Registers one Azure Function per entry of the route table. No logic lives here.
 */
import { app } from '@azure/functions';
import { routes, functionName } from '../shared/api/route-table';
import { makeHandler } from '../shared/api/http';
import { azureRoute } from '../shared/api/router';
import { getServices } from '../shared/runtime';

for (const r of routes) {
  app.http(functionName(r), {
    methods: [r.method],
    authLevel: 'anonymous',
    route: azureRoute(r),
    handler: makeHandler(r, getServices),
  });
}
