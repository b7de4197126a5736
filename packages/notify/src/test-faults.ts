/**
 * The test-only preference-store fault of the router and the delivery workers (`--set test_faults=1`): POST
 * /v1/test/faults {"preference_store": "up"|"down"} cuts this worker off the preference store, as a network
 * partition would. Without the setting the route does not exist and the store is always reachable.
 */
import { badRequest, type Router } from '@raftkit/http';

export interface PreferenceStoreFault {
  /** Throws, as an unreachable store would, while the fault is on. */
  check(): void;
}

export function preferenceStoreFault(router: Router, settings: Record<string, string>): PreferenceStoreFault {
  let reachable = true;
  if (settings.test_faults === '1') {
    router.post('/v1/test/faults', { admits: 'cluster' }, async (ctx) => {
      const body = (await ctx.json()) as { preference_store?: string };
      if (body.preference_store !== 'up' && body.preference_store !== 'down') throw badRequest('invalid_field', 'preference_store must be up or down', { field: 'preference_store' });
      reachable = body.preference_store === 'up';
      return { preference_store: reachable ? 'up' : 'down' };
    });
  }
  return {
    check: () => {
      if (!reachable) throw new Error('the preference store is unreachable (test fault)');
    },
  };
}
