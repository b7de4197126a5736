/**
 * Bidder tokens (spec: "how bidder_token is issued: not shown"): an HMAC of the bidder id under the cluster token,
 * issued by POST /api/bidders (cluster token). Any gateway verifies one without replicated state or a call to the
 * members, so authentication happens before routing and costs no Raft work. Revoking means rotating the cluster
 * token (as for the toolkit's client tokens).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export const BIDDER_ID = /^[A-Za-z0-9._:@-]{1,128}$/;

export function bidderToken(clusterToken: string, bidderId: string): string {
  return `bt1.${createHmac('sha256', clusterToken).update(`bidder:${bidderId}`).digest('base64url')}`;
}

export function verifyBidderToken(clusterTokens: readonly string[], bidderId: string, token: string): boolean {
  const presented = Buffer.from(token);
  for (const t of clusterTokens) {
    const expected = Buffer.from(bidderToken(t, bidderId));
    if (expected.length === presented.length && timingSafeEqual(expected, presented)) return true;
  }
  return false;
}
