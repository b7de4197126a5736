/** Waiting for exactly one leader among in-process members. */

/** The one member that leads, once exactly one does; throws after `timeoutMs`. */
export async function leaderOf<N extends { isLeader: boolean }>(nodes: Map<string, N>, timeoutMs = 10_000): Promise<N> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const leaders = [...nodes.values()].filter((n) => n.isLeader);
    if (leaders.length === 1) return leaders[0]!;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`no single leader within ${timeoutMs} ms`);
}
