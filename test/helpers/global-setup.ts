/**
 * Starts one Azurite for the whole test run (each test file isolates itself by name prefix).
 */
import { startAzurite } from '../../shared/local/azurite';

export default async function globalSetup(): Promise<void> {
  if (process.env.TEST_STORAGE_CONNECTION) return;
  const azurite = await startAzurite();
  process.env.TEST_STORAGE_CONNECTION = azurite.connectionString;
  (globalThis as { __azurite?: unknown }).__azurite = azurite;
}
