/**
 * Recovery after losing a quorum (etcd's --force-new-cluster): a surviving member's stored log is rewritten so
 * that it is the only voter. What it had committed stays; what it had not is dropped (it was never acknowledged
 * as committed, and no other member can now vouch for it); a config entry naming it the sole voter is appended in
 * its current term. Started on that storage, the member elects itself and commits at once.
 */
import type { Configuration, Entry, HardState, NodeId, Snapshot, Storage } from './types.js';

interface Stored {
  hardState: HardState;
  snapshot: Snapshot | null;
  entries: Entry[];
}

/** Rewrites `stored` (and the storage) so that `id` is the sole voter; false when it already is. */
export async function forceSoleVoter(
  storage: Storage,
  stored: Stored,
  id: NodeId,
  fallbackConfig: Configuration,
  now: number,
): Promise<boolean> {
  const { hardState, snapshot } = stored;
  const kept = stored.entries.filter((e) => e.index <= hardState.commit);
  let current = snapshot?.meta.config ?? fallbackConfig;
  for (const e of kept) if (e.kind === 'config') current = e.config;
  if (
    kept.length === stored.entries.length &&
    current.voters.length === 1 &&
    current.voters[0] === id &&
    current.learners.length === 0
  )
    return false;
  const address = current.addresses?.[id] ?? fallbackConfig.addresses?.[id];
  const config: Configuration = {
    voters: [id],
    learners: [],
    ...(address !== undefined ? { addresses: { [id]: address } } : {}),
  };
  const lastIndex = kept.at(-1)?.index ?? snapshot?.meta.index ?? 0;
  const lastTerm = kept.at(-1)?.term ?? snapshot?.meta.term ?? 0;
  const term = Math.max(hardState.term, lastTerm, 1);
  const time = Math.max(now, kept.at(-1)?.time ?? snapshot?.meta.time ?? 0);
  const entry: Entry = {
    index: lastIndex + 1,
    term,
    time,
    kind: 'config',
    change: { type: 'forceNewCluster', node: id },
    config,
  };
  // append() drops every stored entry from entry.index on: the uncommitted tail goes with it.
  await storage.append([entry], { term, vote: hardState.vote, commit: hardState.commit });
  return true;
}
