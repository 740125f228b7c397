/**
 * The one route table. functions/http.ts registers an Azure Function per entry; the local host
 * serves the same entries. Order matters for the local host only: specific routes first.
 */
import type { RouteDef } from './types';
import { taskRoutes } from './routes/tasks';
import { authRoutes } from './routes/auth';
import { workRoutes } from './routes/work';
import { pollRoutes } from './routes/polls';
import { artifactRoutes } from './routes/artifacts';
import { opsRoutes } from './routes/ops';
import { groupRoutes } from './routes/groups';
import { eventRoutes } from './routes/events';
import { objectRoutes } from './routes/object';
import { schedulingRoutes } from './routes/scheduling';
import { referenceRoutes } from './references';
import { indexRoutes } from './routes/index';
import { hookRoutes } from './routes/hooks';
import { secretRoutes } from './routes/secrets';
import { azureRoutes } from './routes/azure';

export const routes: RouteDef[] = [
  ...taskRoutes,
  ...workRoutes,
  ...groupRoutes,
  ...schedulingRoutes,
  ...eventRoutes,
  ...pollRoutes,
  ...artifactRoutes,
  ...authRoutes,
  ...azureRoutes,
  ...opsRoutes,
  ...objectRoutes,
  ...referenceRoutes(() => routes),
  ...indexRoutes,
  ...hookRoutes,
  ...secretRoutes,
];

export function functionName(r: RouteDef): string {
  return `${r.service}_${r.name}`;
}
