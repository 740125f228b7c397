/**
 * The per-process app used by the Azure Functions entry points (settings are read on first use).
 */
import { loadConfig } from './config';
import { createApp } from './app';

export const runtimeApp = createApp(() => loadConfig(process.env));
