/**
 * Registers the timer functions (the reaper). No logic lives here.
 */
import { app } from '@azure/functions';
import { timerFunctions } from '../shared/reaper/timers';
import { getServices } from '../shared/runtime';

for (const t of timerFunctions(getServices)) {
  app.timer(t.name, { schedule: t.schedule, runOnStartup: false, handler: t.handler });
}
