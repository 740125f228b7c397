/**
 * The timer functions, as data: the Azure registration and the local host both read this list.
 */
import type { Timer, InvocationContext } from '@azure/functions';
import type { Services } from '../services';
import { runReaper } from './reaper';

export interface TimerFunction {
  name: string;
  /** Resolved from the app setting at run time, as Azure does for `%NAME%`. */
  schedule: string;
  handler: (timer: Timer, context: InvocationContext) => Promise<void>;
}

export function timerFunctions(services: () => Promise<Services>): TimerFunction[] {
  return [
    {
      name: 'reaper',
      schedule: '%QUEUE_REAPER_SCHEDULE%',
      handler: async () => {
        await runReaper(await services());
      },
    },
  ];
}
