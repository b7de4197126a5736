/**
 * The partition editor: every member starts on side A; drag chips between the sides (HTML5 drag and drop), or
 * click a chip to move it to the other side (for keyboards and touch screens), then "Partition". "Heal" joins all.
 */
import { useState } from 'preact/hooks';
import type { ClusterView } from './types.js';

export function PartitionEditor({
  cluster,
  colourOf,
  busy,
  partition,
  heal,
}: {
  cluster: ClusterView;
  colourOf: (id: string) => string;
  busy: boolean;
  partition: (sides: string[][]) => void;
  heal: () => void;
}) {
  const [onB, setOnB] = useState<ReadonlySet<string>>(new Set());
  const [over, setOver] = useState<'a' | 'b' | null>(null);
  const ids = cluster.members.filter((m) => m.state !== 'removed').map((m) => m.id);
  const sideA = ids.filter((id) => !onB.has(id));
  const sideB = ids.filter((id) => onB.has(id));

  const move = (id: string, side: 'a' | 'b'): void => {
    const next = new Set(onB);
    if (side === 'b') next.add(id);
    else next.delete(id);
    setOnB(next);
  };

  const side = (name: 'a' | 'b', members: string[]) => (
    // A drop target for dragged chips; the keyboard moves a chip with Enter or Space on the chip itself.
    // biome-ignore lint/a11y/noStaticElementInteractions: see above
    <div
      class={`side ${over === name ? 'over' : ''}`}
      data-testid={`side-${name}`}
      onDragOver={(e) => {
        e.preventDefault();
        if (e.dataTransfer) e.dataTransfer.dropEffect = 'move';
        setOver(name);
      }}
      onDragLeave={() => setOver(null)}
      onDrop={(e) => {
        e.preventDefault();
        setOver(null);
        const id = e.dataTransfer?.getData('text/plain') ?? '';
        if (ids.includes(id)) move(id, name);
      }}
    >
      <div class="side-title">side {name.toUpperCase()}</div>
      {members.map((id) => (
        // A <button> cannot be dragged in every browser; the span takes focus, Enter and Space like one.
        // biome-ignore lint/a11y/useSemanticElements: see above
        <span
          key={id}
          class="chip"
          style={{ borderColor: colourOf(id) }}
          draggable
          data-testid={`chip-${id}`}
          title="drag to the other side, or click (Enter) to move it across"
          onDragStart={(e) => {
            e.dataTransfer?.setData('text/plain', id);
            if (e.dataTransfer) e.dataTransfer.effectAllowed = 'move';
          }}
          tabIndex={0}
          role="button"
          onClick={() => move(id, name === 'a' ? 'b' : 'a')}
          onKeyDown={(e) => {
            if (e.key !== 'Enter' && e.key !== ' ') return;
            e.preventDefault();
            move(id, name === 'a' ? 'b' : 'a');
          }}
        >
          {id}
        </span>
      ))}
    </div>
  );

  const active = cluster.partition;
  return (
    <div class="partition">
      <div class="sides">
        {side('a', sideA)}
        {side('b', sideB)}
      </div>
      <div class="partition-buttons">
        <button
          type="button"
          data-testid="partition-apply"
          disabled={busy || sideA.length === 0 || sideB.length === 0}
          onClick={() => partition([sideA, sideB])}
        >
          Partition
        </button>
        <button type="button" data-testid="heal" disabled={busy} onClick={heal}>
          Heal
        </button>
        <span
          class={`partition-status ${active ? 'active' : ''}`}
          data-testid="partition-status"
          data-active={active ? 'true' : 'false'}
        >
          {active ? `partitioned: ${active.map((s) => s.join(' ')).join('  |  ')}` : 'no partition'}
        </span>
      </div>
    </div>
  );
}
