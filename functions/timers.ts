/**
 * Registers the timer functions (the reaper). No logic lives here.
 */
import { app } from '@azure/functions';
import { runtimeApp } from '../shared/runtime';

for (const t of runtimeApp.timers) {
  app.timer(t.name, { schedule: t.schedule, runOnStartup: false, handler: t.handler });
}
