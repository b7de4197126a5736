/**
 * Virtual time and the event queue. Events run in order of time, then of scheduling (a sequence number breaks
 * ties), so a run is a pure function of its seed.
 */

interface SimEvent {
  readonly time: number;
  readonly seq: number;
  readonly run: () => void;
}

function before(a: SimEvent, b: SimEvent): boolean {
  return a.time < b.time || (a.time === b.time && a.seq < b.seq);
}

/** A binary min-heap of events plus the virtual clock (ms), which only moves forward as events are popped. */
export class EventQueue {
  private heap: SimEvent[] = [];
  private seq = 0;
  now = 0;

  get size(): number {
    return this.heap.length;
  }

  /** Run `run` at virtual time `time` (never earlier than now). */
  at(time: number, run: () => void): void {
    const event: SimEvent = { time: Math.max(time, this.now), seq: this.seq++, run };
    const heap = this.heap;
    let i = heap.length;
    heap.push(event);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(event, heap[parent]!)) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = event;
  }

  /** Run `run` after `delay` ms of virtual time. */
  after(delay: number, run: () => void): void {
    this.at(this.now + delay, run);
  }

  /** Remove the next event and move the clock to its time. */
  pop(): SimEvent | undefined {
    const heap = this.heap;
    const top = heap[0];
    if (top === undefined) return undefined;
    const last = heap.pop()!;
    if (heap.length > 0) {
      let i = 0;
      const n = heap.length;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= n) break;
        const r = l + 1;
        const child = r < n && before(heap[r]!, heap[l]!) ? r : l;
        if (!before(heap[child]!, last)) break;
        heap[i] = heap[child]!;
        i = child;
      }
      heap[i] = last;
    }
    this.now = top.time;
    return top;
  }
}
