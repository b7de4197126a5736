/** Small state machines for tests: a counter that adds, and a register that holds the last value. */
import type { StateMachine } from '../../src/types.js';

export class Counter implements StateMachine<number, number> {
  total = 0;
  apply(n: number): number {
    return (this.total += n);
  }
  snapshot(): Uint8Array {
    return Buffer.from(String(this.total));
  }
  restore(data: Uint8Array): void {
    this.total = Number(Buffer.from(data).toString());
  }
}

export class Register implements StateMachine<string, string> {
  value = '';
  apply(value: string): string {
    return (this.value = value);
  }
  snapshot(): Uint8Array {
    return Buffer.from(this.value);
  }
  restore(data: Uint8Array): void {
    this.value = Buffer.from(data).toString();
  }
}
