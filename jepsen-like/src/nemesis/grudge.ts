/**
 * Network partitions as "grudges" (Jepsen's word): the set of directed links that are cut. A link "a>b" cut
 * means messages from a to b are lost; a symmetric partition cuts both directions.
 */
import type { Rng } from '../rng.js';
import type { PartitionShape } from './faults.js';

export type Link = `${string}>${string}`;

export interface Grudge {
  shape: PartitionShape;
  /** The cut directed links, sorted. */
  links: Link[];
  /** How the members see each other, for people: e.g. "n1 n2 | n3 n4 n5". */
  description: string;
}

export function link(from: string, to: string): Link {
  return `${from}>${to}`;
}

/** Cut every link between different components (each member sees only its own component). */
export function complete(components: readonly (readonly string[])[]): Link[] {
  const links: Link[] = [];
  for (const a of components)
    for (const b of components) if (a !== b) for (const x of a) for (const y of b) links.push(link(x, y));
  return links.sort();
}

/**
 * The partition of `shape` over `members` (at least 3), given the current leader (null if unknown: a random
 * member stands in for it).
 */
export function makeGrudge(shape: PartitionShape, members: readonly string[], leader: string | null, rng: Rng): Grudge {
  if (members.length < 3) throw new RangeError('partitions need at least 3 members');
  const ids = [...members].sort();
  const chosenLeader = leader !== null && ids.includes(leader) ? leader : rng.pick(ids);
  switch (shape) {
    case 'halves': {
      // Jepsen's random halves: a random minority and the rest.
      const shuffled = rng.shuffle(ids);
      const small = shuffled.slice(0, Math.floor(ids.length / 2)).sort();
      const large = shuffled.slice(Math.floor(ids.length / 2)).sort();
      return { shape, links: complete([small, large]), description: `${small.join(' ')} | ${large.join(' ')}` };
    }
    case 'isolate-leader': {
      const rest = ids.filter((id) => id !== chosenLeader);
      return {
        shape,
        links: complete([[chosenLeader], rest]),
        description: `${chosenLeader} (leader) | ${rest.join(' ')}`,
      };
    }
    case 'majority-ring': {
      // Members on a random ring; each keeps the links to its nearest neighbours on both sides, enough to see a
      // majority counting itself. Every member sees a majority and no two see the same one.
      const ring = rng.shuffle(ids);
      const n = ring.length;
      const majority = Math.floor(n / 2) + 1;
      const reach = Math.ceil((majority - 1) / 2);
      const links: Link[] = [];
      const sees: string[] = [];
      for (let i = 0; i < n; i++) {
        const visible = new Set<string>();
        for (let d = -reach; d <= reach; d++) visible.add(ring[(i + d + n) % n]!);
        for (const other of ring) if (!visible.has(other)) links.push(link(ring[i]!, other));
        sees.push(`${ring[i]} sees ${[...visible].sort().join(',')}`);
      }
      return { shape, links: links.sort(), description: `ring ${ring.join('-')}: ${sees.join('; ')}` };
    }
    case 'bridge': {
      // Two halves that cannot reach each other, and one member in both (Jepsen's bridge).
      const shuffled = rng.shuffle(ids);
      const half = Math.floor((ids.length - 1) / 2);
      const left = shuffled.slice(0, half).sort();
      const bridge = shuffled[half]!;
      const right = shuffled.slice(half + 1).sort();
      const links = complete([left, right]);
      return { shape, links, description: `${left.join(' ')} | ${bridge} (bridge) | ${right.join(' ')}` };
    }
    case 'one-way': {
      // One member (the leader half the time) either cannot send to the others or cannot hear from them.
      const who = rng.chance(0.5) ? chosenLeader : rng.pick(ids);
      const rest = ids.filter((id) => id !== who);
      const deaf = rng.chance(0.5);
      const links = rest.map((other) => (deaf ? link(other, who) : link(who, other))).sort();
      const role = who === leader ? ' (leader)' : '';
      return {
        shape,
        links,
        description: deaf
          ? `${who}${role} hears nobody (others → ${who} cut)`
          : `${who}${role} reaches nobody (${who} → others cut)`,
      };
    }
  }
}
