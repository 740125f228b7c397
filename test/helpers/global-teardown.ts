import type { Azurite } from '../../shared/local/azurite';

export default async function globalTeardown(): Promise<void> {
  const azurite = (globalThis as { __azurite?: Azurite }).__azurite;
  if (azurite) await azurite.stop();
}
