/**
 * Runs a fault schedule against the cluster: each action at its time, recorded in the history (process
 * "nemesis"), then the final heal: every fault still active is stopped, every member is running and resumed,
 * every link restored, every clock reset.
 */
import type { HistoryWriter } from '../history.js';
import type { ActiveFault, NemesisContext, NemesisHandler } from './context.js';
import { clockNemesis } from './clock.js';
import type { NemesisName } from './faults.js';
import { killNemesis } from './kill.js';
import { packetNemesis } from './packet.js';
import { healNetwork, partitionNemesis } from './partition.js';
import { pauseNemesis } from './pause.js';
import { quietNemesis } from './quiet.js';
import { wipeNemesis } from './wipe.js';
import type { ScheduledAction } from './schedule.js';

const handlers: Record<NemesisName, NemesisHandler> = {
  kill: killNemesis,
  pause: pauseNemesis,
  partition: partitionNemesis,
  packet: packetNemesis,
  clock: clockNemesis,
  quiet: quietNemesis,
  wipe: wipeNemesis,
};

/** A fault as it happened, for result.json and the report (times in ns since the run started). */
export interface FaultRecord {
  id: number;
  nemesis: NemesisName;
  description: string;
  targets: string[];
  detail: Record<string, unknown>;
  start: number;
  stop: number | null;
}

export class NemesisRunner {
  private readonly active = new Map<number, ActiveFault>();
  readonly faults: FaultRecord[] = [];
  private stopped = false;
  private healed = false;

  constructor(
    private readonly ctx: NemesisContext,
    private readonly history: HistoryWriter,
  ) {}

  activeDescriptions(): string[] {
    return [...this.active.values()].map((a) => a.description);
  }

  /** Runs `schedule` (times relative to `startedAt`, a Date.now() value) until done or `abort` fires. */
  async run(schedule: readonly ScheduledAction[], startedAt: number, abort: AbortSignal): Promise<void> {
    for (const action of schedule) {
      const wait = startedAt + action.at - Date.now();
      if (wait > 0) await sleep(wait, abort);
      if (abort.aborted || this.stopped) return;
      try {
        if (action.action === 'start') await this.start(action);
        else await this.stop(action.id);
      } catch (e) {
        this.ctx.say(`nemesis: ${action.action} ${action.fault.nemesis} failed: ${(e as Error).message}`);
        this.history.append({
          process: 'nemesis',
          type: 'info',
          f: `${action.action}-${action.fault.nemesis}`,
          value: { id: action.id, error: (e as Error).message },
        });
      }
    }
  }

  private async start(action: ScheduledAction): Promise<void> {
    const others = [...this.active.values()];
    const time = this.history.now();
    const active = await handlers[action.fault.nemesis].start(action.id, action.fault, this.ctx, others);
    this.active.set(action.id, active);
    this.faults.push({
      id: action.id,
      nemesis: action.fault.nemesis,
      description: active.description,
      targets: active.targets,
      detail: active.detail,
      start: time,
      stop: null,
    });
    this.history.append({
      process: 'nemesis',
      type: 'info',
      f: `start-${action.fault.nemesis}`,
      value: {
        id: action.id,
        fault: action.fault,
        targets: active.targets,
        ...active.detail,
        description: active.description,
      },
      time,
    });
    this.ctx.say(`nemesis: start ${active.description}`);
  }

  private async stop(id: number): Promise<void> {
    const active = this.active.get(id);
    if (active === undefined) return;
    this.active.delete(id);
    const others = [...this.active.values()];
    const result = await handlers[active.fault.nemesis].stop(active, this.ctx, others);
    if (active.fault.nemesis === 'partition' && !others.some((o) => o.fault.nemesis === 'partition'))
      await healNetwork(this.ctx);
    const record = this.faults.find((f) => f.id === id);
    const time = this.history.now();
    if (record) record.stop = time;
    this.history.append({
      process: 'nemesis',
      type: 'info',
      f: `stop-${active.fault.nemesis}`,
      value: { id, targets: active.targets, ...result },
      time,
    });
    this.ctx.say(`nemesis: stop ${active.description}`);
  }

  /** The final heal. Never throws: each step is tried. */
  async healAll(): Promise<void> {
    if (this.healed) return;
    this.healed = true;
    this.stopped = true;
    // Wipes last: bringing a wiped member back is a membership change, which needs the quorum the other faults
    // (pauses, partitions, kills) may be holding away.
    const order = [...this.active.entries()]
      .sort(([, a], [, b]) => Number(a.fault.nemesis === 'wipe') - Number(b.fault.nemesis === 'wipe'))
      .map(([id]) => id);
    for (const id of order) {
      try {
        await this.stop(id);
      } catch (e) {
        this.ctx.say(`nemesis: stopping fault ${id} failed: ${(e as Error).message}`);
      }
    }
    const steps: Array<[string, () => Promise<void> | void]> = [
      ['restore links', () => this.ctx.network.setCuts([])],
      [
        'clear packet faults',
        () => (this.ctx.network.packetFaults === 'none' ? undefined : this.ctx.network.setPacketRules([])),
      ],
      ['resume members', () => void this.ctx.cluster.ids.forEach((m) => this.ctx.cluster.resume(m))],
      ['restart members', () => void this.ctx.cluster.ids.forEach((m) => this.ctx.cluster.start(m))],
    ];
    for (const [name, step] of steps) {
      try {
        await step();
      } catch (e) {
        this.ctx.say(`heal: ${name} failed: ${(e as Error).message}`);
      }
    }
    for (const [name, handler] of Object.entries(handlers)) {
      try {
        await handler.heal?.(this.ctx);
      } catch (e) {
        this.ctx.say(`heal: ${name} failed: ${(e as Error).message}`);
      }
    }
    this.history.append({
      process: 'nemesis',
      type: 'info',
      f: 'heal',
      value: { description: 'final heal: every link restored, every member running' },
    });
    this.ctx.say('nemesis: final heal');
  }
}

function sleep(ms: number, abort: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (abort.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      abort.removeEventListener('abort', done);
      resolve();
    }
    abort.addEventListener('abort', done, { once: true });
  });
}
