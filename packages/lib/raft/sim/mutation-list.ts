/** The deliberate bugs the mutation check plants, one at a time (see mutations.ts). */
import type { CoreMutations, SimConfig, SimMutations } from './config.js';

interface Mutation {
  name: string;
  what: string;
  core?: CoreMutations;
  sim?: SimMutations;
}

export const MUTATIONS: Mutation[] = [
  { name: 'grantStaleVote', what: 'vote for a candidate whose log is behind ours', core: { grantStaleVote: true } },
  {
    name: 'commitPreviousTermByCount',
    what: 'commit entries of earlier terms by counting replicas (Figure 8)',
    core: { commitPreviousTermByCount: true },
  },
  { name: 'skipPrevCheck', what: 'accept appends without matching the previous entry', core: { skipPrevCheck: true } },
  { name: 'ignoreHigherTerm', what: 'a leader ignores messages of higher terms', core: { ignoreHigherTerm: true } },
  {
    name: 'sendBeforePersist',
    what: "send all of a Ready's messages (acknowledgements too) before its writes are durable",
    sim: { sendBeforePersist: true },
  },
  {
    name: 'syncOnlyEntries',
    what: 'a Ready without entries is never synced, even when it holds a new term or vote',
    sim: { syncOnlyEntries: true },
  },
  {
    name: 'countSelfUnpersisted',
    what: 'a leader counts itself in the commit quorum before its own write is durable',
    core: { countSelfUnpersisted: true },
  },
  {
    name: 'commitNewsPastMatch',
    what: "a leader's commit news, sent during its write, tells a follower a commit index past what the follower holds",
    core: { commitNewsPastMatch: true },
  },
  {
    name: 'staleLocalReads',
    what: 'serve reads from local state without a read index',
    sim: { staleLocalReads: true },
  },
  { name: 'noSessionDedup', what: 'apply retried session commands again', sim: { noSessionDedup: true } },
  {
    name: 'quiesceNeverWakes',
    what: 'a quiesced follower never notices that its leader died',
    sim: { quiesceNeverWakes: true },
  },
  {
    name: 'brokenCoalescing',
    what: 'the heartbeat batch expander applies each heartbeat to the wrong group',
    sim: { brokenCoalescing: true },
  },
  {
    name: 'brokenBatching',
    what: "the message batch expander hands each of a batch's messages to the wrong group",
    sim: { brokenBatching: true },
  },
  {
    name: 'resultsAnswerAll',
    what: "a leader's results for forwarded writes answer every write waiting at the follower, not only their own",
    sim: { resultsAnswerAll: true },
  },
  {
    name: 'detachedIndexAtSave',
    what: 'a detached snapshot is recorded under the index applied when it is saved, newer than its data',
    sim: { detachedIndexAtSave: true },
  },
];

export function findMutation(name: string): Mutation {
  const m = MUTATIONS.find((x) => x.name === name);
  if (m === undefined) throw new Error(`unknown mutation ${name} (known: ${MUTATIONS.map((x) => x.name).join(', ')})`);
  return m;
}

/** The SimConfig fields that plant mutation `m`. */
export function mutationPatch(m: Mutation): Partial<SimConfig> {
  const patch: Partial<SimConfig> = {};
  if (m.core !== undefined) patch.coreMutations = m.core;
  if (m.sim !== undefined) patch.simMutations = m.sim;
  return patch;
}
