/**
 * The fixed test client of Taskcluster's testAuthenticate / testAuthenticateGet: clientId `tester`
 * with accessToken `no-secret`, its scopes given by the call, no roles. Client libraries check
 * their request signing against it.
 */
import { Authenticator, ClientSource } from './authenticate';
import { Client, staticClient } from './clients';
import { normalize } from './scopes';

export const TEST_CLIENT_ID = 'tester';
export const TEST_ACCESS_TOKEN = 'no-secret';
/** testAuthenticateGet's client scopes, as Taskcluster's. */
export const TEST_GET_SCOPES = ['test:*', 'auth:create-client:test:*'];

function testClient(scopes: string[]): Client {
  return staticClient({ clientId: TEST_CLIENT_ID, description: 'the test client of testAuthenticate', accessToken: TEST_ACCESS_TOKEN, scopes });
}

/** Only `tester` exists; its scopes are not expanded through roles (Taskcluster's test validator has none). */
function testSource(scopes: string[]): ClientSource {
  return {
    client: async (clientId: string) => (clientId === TEST_CLIENT_ID ? testClient(scopes) : undefined),
    expand: async (s: string[]) => normalize(s),
  };
}

/** Authenticates against the test client holding `scopes`; nobody holds the anonymous role here. */
export function testAuthenticator(scopes: string[], now: () => Date): Authenticator {
  return new Authenticator(testSource(scopes), now, { anonymousRole: false });
}
