/**
 * The link store members' Raft timing (src/index.ts MEMBER_HEARTBEAT_TICKS): fewer heartbeats than the library's
 * default, but still several per election timeout (the library's 10-20 ticks), within what the simulator draws (1
 * to 3 ticks against 10), so failover and every invariant it checks hold as for the default.
 */
import t from 'tap';
import { oneGroupKind } from '@raftkit/http';
import { MEMBER_HEARTBEAT_TICKS, shortlinkService } from '../src/index.js';

t.test('the service hands its members a heartbeat interval the simulator covers', async (t) => {
  t.same(oneGroupKind(shortlinkService.kinds)?.raft, { heartbeatTicks: MEMBER_HEARTBEAT_TICKS });
  t.ok(
    Number.isInteger(MEMBER_HEARTBEAT_TICKS) && MEMBER_HEARTBEAT_TICKS >= 1 && MEMBER_HEARTBEAT_TICKS <= 3,
    "within the simulator's 1-3 ticks",
  );
  t.ok(3 * MEMBER_HEARTBEAT_TICKS <= 10, 'at least 3 heartbeats in the shortest election timeout (10 ticks)');
});
