/** A FIFO of records with O(1) amortized push, take and put-back-at-front. */
export class RecordQueue {
  private items: Uint8Array[] = [];
  private head = 0;

  get size(): number {
    return this.items.length - this.head;
  }

  push(item: Uint8Array): void {
    this.items.push(item);
  }

  /** Removes and returns up to `n` records from the front, stopping before `maxBytes` (but at least one). */
  take(n: number, maxBytes = Infinity): Uint8Array[] {
    const out: Uint8Array[] = [];
    let bytes = 0;
    while (out.length < n && this.head < this.items.length) {
      const item = this.items[this.head]!;
      if (out.length > 0 && bytes + item.length > maxBytes) break;
      out.push(item);
      bytes += item.length;
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return out;
  }

  /** Puts records back at the front, in their order (a batch that was sent but never acknowledged). */
  unshift(records: Uint8Array[]): void {
    this.items = [...records, ...this.items.slice(this.head)];
    this.head = 0;
  }

  clear(): number {
    const n = this.size;
    this.items = [];
    this.head = 0;
    return n;
  }
}
