/**
 * The rule store members' Raft timing: they hold rules and tenants, which the check instances poll about once a
 * second, so they take the tuning of idle members (@raftkit/http IDLE_MEMBERS): fewer heartbeats than the library's
 * default, still several per election timeout and within what the simulator draws (1 to 3 ticks against 10).
 */
import t from 'tap';
import { IDLE_MEMBER_HEARTBEAT_TICKS, oneGroupKind } from '@raftkit/http';
import { ratelimitService } from '../src/service.js';

t.test('the service hands its members the idle heartbeat interval, one the simulator covers', async (t) => {
  t.same(oneGroupKind(ratelimitService.kinds)?.raft, { heartbeatTicks: IDLE_MEMBER_HEARTBEAT_TICKS });
  t.ok(
    Number.isInteger(IDLE_MEMBER_HEARTBEAT_TICKS) &&
      IDLE_MEMBER_HEARTBEAT_TICKS >= 1 &&
      IDLE_MEMBER_HEARTBEAT_TICKS <= 3,
    "within the simulator's 1-3 ticks",
  );
  t.ok(3 * IDLE_MEMBER_HEARTBEAT_TICKS <= 10, 'at least 3 heartbeats in the shortest election timeout (10 ticks)');
});
