/**
 * The legacy worker protocol: SAS-signed URLs to poll a worker type's pending queues directly
 * (deprecated upstream, kept for old workers such as taskcluster-client@10 users).
 */
import { RouteDef, ok } from '../types';
import { pollTaskUrls } from '../../work/poll-urls';

export const pollRoutes: RouteDef[] = [
  {
    name: 'pollTaskUrls',
    title: 'Get Urls to Poll Pending Tasks',
    stability: 'deprecated',
    output: 'poll-task-urls-response',
    service: 'queue',
    method: 'GET',
    route: '/poll-task-url/<provisionerId>/<workerType>',
    scopes: {
      AnyOf: ['queue:poll-task-urls:<provisionerId>/<workerType>', { AllOf: ['queue:poll-task-urls', 'assume:worker-type:<provisionerId>/<workerType>'] }],
    },
    description: 'Signed URLs to poll and delete messages of the pending queues of a worker type, highest priority first.',
    handler: async (req) => ok(await pollTaskUrls(req.services, `${req.params.provisionerId}/${req.params.workerType}`)),
  },
];
