/**
 * The flash workload's checks, pure: they read a history and nothing else, so they are unit-tested on hand-made
 * histories (test/flash-checks.test.ts) that must fail.
 *
 * The history (written by workloads/flash.ts):
 * - `setup-deal` ok value `{deal_id, total_inventory, shards}`: the deal under test (the checks' inventory bound).
 * - `attempt` key `user/idempotency_key`, invoke value `{user, key, gateway}`; ok value the attempt's answer
 *   (`{status: "won" | "lost" | "queued", reservation_id?, expires_at?, reason?}`); fail (a 4xx: certainly not
 *   decided, e.g. busy 429); info (unknown: timeout, reset, 5xx).
 * - `final-attempt`: the same, sent after the heal for every key whose outcome was never known (info, queued).
 * - `read-reservation` key `user`, invoke value `{user, reservation_id}`; ok value `{reservation_id, user_id,
 *   status}`; fail error `not_found` when the service does not know it.
 * - `read-state` ok value `{state, remaining?}`: the deal's state after the heal.
 *
 * Checks:
 * - `no-oversell`: distinct reservations anyone was told they won (and reservations read back) never exceed
 *   total_inventory; with the final state's `remaining`, sold + remaining never exceed it either.
 * - `one-per-user`: no user was told two different reservation ids.
 * - `acked-wins-present`: every acknowledged win is read back after the heal, its user's, with a holding status.
 * - `one-answer-per-key`: every answer to one key is the same decision: all wins name one reservation; a key
 *   answered won is never answered lost (before or after); a lost decided by the inventory is never later won.
 *   Lost answers the gateway gave from local memory (reason in `localReasons`, e.g. the token pool spent) decide
 *   nothing and may be followed by a decision. Every key whose outcome was unknown got an answer after the heal.
 *   And every unit that left the inventory was answered to someone (total - remaining = the wins answered):
 *   otherwise a key decided won was answered otherwise (`hidden-wins`).
 */
import type { HistoryEvent } from '../history.js';
import type { Anomaly, CheckResult } from './workload.js';

export interface FlashCheckOptions {
  /** Reasons of a `lost` answer given by the gateway from local memory (not remembered by the inventory). */
  localReasons: readonly string[];
  /** Reservation statuses that count as "the win is present" after the heal. */
  holdingStatuses: readonly string[];
}

export const DEFAULT_FLASH_CHECK_OPTIONS: FlashCheckOptions = {
  localReasons: ['sold_out', 'tokens_exhausted', 'not_live'],
  holdingStatuses: ['reserved', 'paid'],
};

interface Answer {
  status: string;
  reservationId: string | null;
  reason: string | null;
  time: number;
  final: boolean;
}

interface AttemptInput {
  user: string;
  key: string;
}

function record(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {};
}

function str(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

/** Pairs each completion with its invocation (by process), for the given operation names. */
function completions(
  events: readonly HistoryEvent[],
  fs: ReadonlySet<string>,
): Array<{ invoke: HistoryEvent; done: HistoryEvent }> {
  const open = new Map<number, HistoryEvent>();
  const out: Array<{ invoke: HistoryEvent; done: HistoryEvent }> = [];
  for (const e of events) {
    if (typeof e.process !== 'number' || !fs.has(e.f)) continue;
    if (e.type === 'invoke') {
      open.set(e.process, e);
      continue;
    }
    const invoke = open.get(e.process);
    open.delete(e.process);
    if (invoke !== undefined) out.push({ invoke, done: e });
  }
  return out;
}

export function checkFlashHistory(
  events: readonly HistoryEvent[],
  options: FlashCheckOptions = DEFAULT_FLASH_CHECK_OPTIONS,
): CheckResult[] {
  const local = new Set(options.localReasons);
  const holding = new Set(options.holdingStatuses);

  let total: number | null = null;
  for (const e of events) {
    if (e.f === 'setup-deal' && e.type === 'ok') {
      const n = record(e.value).total_inventory;
      if (typeof n === 'number') total = n;
    }
  }

  // Every answer, per key; every reservation each user was told, and who each reservation was told to.
  const answers = new Map<string, Answer[]>();
  const inputs = new Map<string, AttemptInput>();
  const unknown = new Set<string>();
  const winsByUser = new Map<string, Map<string, number>>();
  const reservationUser = new Map<string, Set<string>>();
  const won = (user: string, reservationId: string, time: number): void => {
    let mine = winsByUser.get(user);
    if (mine === undefined) winsByUser.set(user, (mine = new Map()));
    if (!mine.has(reservationId)) mine.set(reservationId, time);
    let holders = reservationUser.get(reservationId);
    if (holders === undefined) reservationUser.set(reservationId, (holders = new Set()));
    holders.add(user);
  };
  let attemptsOk = 0;
  let attemptsFail = 0;
  let attemptsInfo = 0;
  let queued = 0;
  for (const { invoke, done } of completions(events, new Set(['attempt', 'final-attempt']))) {
    const input = record(invoke.value);
    const user = str(input.user);
    const key = str(input.key);
    if (user === null || key === null) continue;
    const id = `${user}/${key}`;
    inputs.set(id, { user, key });
    const final = invoke.f === 'final-attempt';
    if (done.type === 'info') {
      if (!final) attemptsInfo++;
      unknown.add(id);
      continue;
    }
    if (done.type === 'fail') {
      if (!final) attemptsFail++;
      continue;
    }
    if (!final) attemptsOk++;
    const v = record(done.value);
    const status = str(v.status) ?? 'unknown';
    const answer: Answer = {
      status,
      reservationId: str(v.reservation_id),
      reason: str(v.reason),
      time: done.time,
      final,
    };
    if (status === 'queued') {
      if (!final) queued++;
      unknown.add(id);
    } else {
      unknown.delete(id);
    }
    let list = answers.get(id);
    if (list === undefined) answers.set(id, (list = []));
    list.push(answer);
    if (status === 'won' && answer.reservationId !== null) won(user, answer.reservationId, done.time);
  }

  // Reservations read back after the heal.
  const readBack = new Map<string, { found: boolean; user: string | null; status: string | null; time: number }>();
  for (const { invoke, done } of completions(events, new Set(['read-reservation']))) {
    const id = str(record(invoke.value).reservation_id);
    if (id === null) continue;
    if (done.type === 'ok') {
      const v = record(done.value);
      readBack.set(id, { found: true, user: str(v.user_id), status: str(v.status), time: done.time });
      const owner = str(v.user_id);
      if (owner !== null && holding.has(str(v.status) ?? '')) won(owner, id, done.time);
    } else if (done.type === 'fail' && done.error === 'not_found' && !readBack.get(id)?.found) {
      readBack.set(id, { found: false, user: null, status: null, time: done.time });
    }
  }
  let remaining: number | null = null;
  for (const { done } of completions(events, new Set(['read-state']))) {
    if (done.type !== 'ok') continue;
    const r = record(done.value).remaining;
    if (typeof r === 'number') remaining = r;
  }

  const results: CheckResult[] = [];

  // no-oversell
  {
    const anomalies: Anomaly[] = [];
    const sold = reservationUser.size;
    if (total === null) {
      anomalies.push({
        check: 'no-oversell',
        type: 'no-deal',
        description: 'the history has no acknowledged setup-deal: the inventory bound is unknown',
      });
    } else {
      if (sold > total) {
        const times = [...winsByUser.values()].flatMap((m) => [...m.values()]).sort((a, b) => a - b);
        anomalies.push({
          check: 'no-oversell',
          type: 'oversold',
          description: `${sold} distinct reservations were won, more than the total inventory of ${total} (oversold by ${sold - total})`,
          times: times.slice(total, total + 5),
        });
      }
      if (remaining !== null && remaining < 0)
        anomalies.push({
          check: 'no-oversell',
          type: 'negative-remaining',
          description: `the deal state reports remaining ${remaining} after the heal`,
        });
      if (remaining !== null && sold + remaining > total) {
        anomalies.push({
          check: 'no-oversell',
          type: 'units-created',
          description: `${sold} won + ${remaining} remaining = ${sold + remaining}, more than the total inventory of ${total}`,
        });
      }
    }
    results.push({
      name: 'no-oversell',
      valid: total === null ? 'unknown' : anomalies.length === 0,
      anomalies,
      stats: { total_inventory: total, reservations_won: sold, remaining_after_heal: remaining },
    });
  }

  // one-per-user
  {
    const anomalies: Anomaly[] = [];
    for (const [user, ids] of winsByUser) {
      if (ids.size > 1)
        anomalies.push({
          check: 'one-per-user',
          type: 'two-reservations',
          description: `${user} holds ${ids.size} reservations: ${[...ids.keys()].join(', ')}`,
          times: [...ids.values()],
        });
    }
    for (const [id, users] of reservationUser) {
      if (users.size > 1)
        anomalies.push({
          check: 'one-per-user',
          type: 'shared-reservation',
          description: `reservation ${id} was answered to ${users.size} users: ${[...users].join(', ')}`,
        });
    }
    results.push({
      name: 'one-per-user',
      valid: anomalies.length === 0,
      anomalies,
      stats: { winners: winsByUser.size },
    });
  }

  // acked-wins-present
  {
    const anomalies: Anomaly[] = [];
    const acked = new Map<string, { user: string; time: number }>();
    for (const [id, list] of answers) {
      const user = inputs.get(id)!.user;
      for (const a of list)
        if (a.status === 'won' && a.reservationId !== null && !acked.has(a.reservationId))
          acked.set(a.reservationId, { user, time: a.time });
    }
    let present = 0;
    let unread = 0;
    for (const [rid, { user, time }] of acked) {
      const read = readBack.get(rid);
      if (read === undefined) {
        unread++;
        anomalies.push({
          check: 'acked-wins-present',
          type: 'not-read',
          description: `the acknowledged win ${rid} of ${user} could not be read after the heal`,
          times: [time],
        });
      } else if (!read.found) {
        anomalies.push({
          check: 'acked-wins-present',
          type: 'lost-win',
          description: `the acknowledged win ${rid} of ${user} is unknown to the service after the heal (404)`,
          times: [time, read.time],
        });
      } else if (read.user !== user) {
        anomalies.push({
          check: 'acked-wins-present',
          type: 'wrong-owner',
          description: `the acknowledged win ${rid} of ${user} reads back as ${read.user ?? 'nobody'}'s`,
          times: [time, read.time],
        });
      } else if (!holding.has(read.status ?? '')) {
        anomalies.push({
          check: 'acked-wins-present',
          type: 'not-holding',
          description: `the acknowledged win ${rid} of ${user} reads back with status ${read.status ?? 'none'}`,
          times: [time, read.time],
        });
      } else {
        present++;
      }
    }
    // A win that could not be read at all is unknown, not wrong; anything else found is wrong.
    const wrong = anomalies.length - unread;
    results.push({
      name: 'acked-wins-present',
      valid: wrong > 0 ? false : unread > 0 ? 'unknown' : true,
      anomalies,
      stats: { acknowledged: acked.size, present },
    });
  }

  // one-answer-per-key
  {
    const anomalies: Anomaly[] = [];
    let retried = 0;
    for (const [id, list] of answers) {
      if (list.length > 1) retried++;
      const wins = new Set(list.filter((a) => a.status === 'won').map((a) => a.reservationId ?? '(none)'));
      if (wins.size > 1)
        anomalies.push({
          check: 'one-answer-per-key',
          type: 'different-wins',
          description: `key ${id} was answered won with ${wins.size} reservations: ${[...wins].join(', ')}`,
          times: list.map((a) => a.time),
        });
      const firstWin = list.find((a) => a.status === 'won');
      if (firstWin !== undefined) {
        const lostAfter = list.find((a) => a.status === 'lost' && a.time > firstWin.time);
        if (lostAfter !== undefined)
          anomalies.push({
            check: 'one-answer-per-key',
            type: 'won-then-lost',
            description: `key ${id} was answered won (${firstWin.reservationId ?? ''}) and later lost${lostAfter.reason !== null ? ` (${lostAfter.reason})` : ''}`,
            times: [firstWin.time, lostAfter.time],
          });
        const decidedLostBefore = list.find(
          (a) => a.status === 'lost' && a.time < firstWin.time && (a.reason === null || !local.has(a.reason)),
        );
        if (decidedLostBefore !== undefined)
          anomalies.push({
            check: 'one-answer-per-key',
            type: 'lost-then-won',
            description: `key ${id} was answered lost by the inventory and later won (${firstWin.reservationId ?? ''})`,
            times: [decidedLostBefore.time, firstWin.time],
          });
      }
    }
    // Units taken from the inventory that no user was told of: a key the inventory decided won was answered
    // otherwise (e.g. sold out from a gateway's local memory), so its user never learns of the unit.
    if (total !== null && remaining !== null && remaining >= 0 && reservationUser.size + remaining < total) {
      const hidden = total - reservationUser.size - remaining;
      anomalies.push({
        check: 'one-answer-per-key',
        type: 'hidden-wins',
        description: `${hidden} unit(s) left the inventory (${total} total, ${remaining} remaining) but only ${reservationUser.size} wins were answered: some key decided won was answered otherwise`,
      });
    }
    for (const id of unknown) {
      const list = answers.get(id) ?? [];
      const decided = list.some((a) => a.status === 'won' || a.status === 'lost');
      if (!decided)
        anomalies.push({
          check: 'one-answer-per-key',
          type: 'never-answered',
          description: `key ${id} had an unknown outcome and got no answer after the heal`,
        });
    }
    results.push({
      name: 'one-answer-per-key',
      valid: anomalies.length === 0,
      anomalies,
      stats: {
        keys: inputs.size,
        keys_answered_more_than_once: retried,
        attempts_ok: attemptsOk,
        attempts_fail: attemptsFail,
        attempts_info: attemptsInfo,
        queued,
      },
    });
  }
  return results;
}
