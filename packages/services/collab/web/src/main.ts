/**
 * The editor page: Quill 2 (snow theme: bold, italic, headings, lists) bound to a CollabClient (the browser-safe
 * core of @raftkit/collab, with the browser's WebSocket), quill-cursors for the other editors' cursors and
 * selections in their colours, and a status badge: live, syncing (changes not yet acknowledged, or the document
 * changing owner), offline, or closed.
 *
 * URL: /docs/{doc_id}?user=<user_id>&token=<user_token>
 */
import Quill from 'quill';
import QuillCursors from 'quill-cursors';
import 'quill/dist/quill.snow.css';
import { CollabClient, type PresenceEvent } from '@raftkit/collab/core';
import { applyLocalChange, docDelta, editsDelta, reconcile, type Delta } from './binding.js';

Quill.register('modules/cursors', QuillCursors);

const params = new URLSearchParams(location.search);
const docId = decodeURIComponent(location.pathname.split('/').filter(Boolean).pop() ?? '');
const userId = params.get('user') ?? '';
const token = params.get('token') ?? '';

const statusEl = document.getElementById('status')!;
const errorEl = document.getElementById('error')!;
document.getElementById('doc-id')!.textContent = docId;
document.getElementById('user-id')!.textContent = userId;

let client: CollabClient | null = null;

/** Undo and redo take back this user's own changes only (CollabClient's per-user undo), not Quill's local history. */
function undoRedo(redo: boolean): boolean {
  if (client === null || client.readOnly) return false;
  if (redo) client.redo();
  else client.undo();
  showDocument();
  return false;
}

const quill = new Quill('#editor', {
  theme: 'snow',
  modules: {
    toolbar: [[{ header: 1 }, { header: 2 }], ['bold', 'italic'], [{ list: 'ordered' }, { list: 'bullet' }], ['clean']],
    cursors: { transformOnTextChange: true, hideDelayMs: 60_000 },
    keyboard: {
      bindings: {
        collabUndo: { key: 'z', shortKey: true, shiftKey: false, handler: () => undoRedo(false) },
        collabRedo: { key: 'z', shortKey: true, shiftKey: true, handler: () => undoRedo(true) },
        collabRedoY: { key: 'y', shortKey: true, handler: () => undoRedo(true) },
      },
    },
  },
  formats: ['bold', 'italic', 'header', 'list'],
  placeholder: 'Type here…',
});
const cursors = quill.getModule('cursors') as QuillCursors;
quill.disable();

/** The badge: the client's state, and "syncing" while changes wait for their acknowledgement. */
function showStatus(): void {
  if (client === null) return;
  const waiting = client.pendingCount;
  let state: string = client.status;
  if (state === 'live' && waiting > 0) state = 'syncing';
  const detail = waiting > 0 && state !== 'live' ? ` · ${waiting} change(s) waiting` : '';
  statusEl.textContent = `${state}${client.readOnly ? ' · read-only' : ''}${detail}`;
  statusEl.dataset['state'] = state;
  document.body.dataset['state'] = state;
}

/** Shows the document's content in the editor, moving only what changed (the local selection is kept). */
function showDocument(): void {
  if (idleTimer !== null) clearTimeout(idleTimer);
  idleTimer = null;
  if (client === null) return;
  try {
    const fix = reconcile(quill.getContents() as unknown as Delta, client);
    if (fix !== null) quill.updateContents(fix.change as never, 'api');
  } catch {
    // The client is rebuilding its replica (after a refused change): the next change event shows it.
  }
  quill.enable(!client.readOnly && client.status !== 'closed');
}

/**
 * A plain remote change (typing, deleting) applied as the edits it made, without diffing the whole document; the
 * full check still runs once things pause (at most one diff per pause, not one per remote keystroke).
 */
function showEdits(edits: Parameters<typeof editsDelta>[0]): void {
  try {
    quill.updateContents(editsDelta(edits) as never, 'api');
  } catch {
    showDocument();
    return;
  }
  idleTimer ??= setTimeout(showDocument, 400);
}

/** After local typing, when it pauses: the check for a format the document holds and the editor does not show. */
let idleTimer: ReturnType<typeof setTimeout> | null = null;

function onPresence(p: PresenceEvent): void {
  if (p.user_id === userId) return;
  if (p.cursor === null) {
    cursors.removeCursor(p.user_id);
    return;
  }
  cursors.createCursor(p.user_id, p.user_id, p.color);
  const sel = p.selection ?? null;
  const index = sel !== null ? Math.min(sel.anchor, sel.head) : p.cursor;
  const length = sel !== null ? Math.abs(sel.head - sel.anchor) : 0;
  cursors.moveCursor(p.user_id, { index, length });
}

quill.on('text-change', (change, old, source) => {
  if (source !== 'user' || client === null) return;
  let differs = true;
  try {
    differs = applyLocalChange(client, change as unknown as Delta, old as unknown as Delta);
  } catch (e) {
    errorEl.textContent = (e as Error).message;
  }
  // The document may hold the change differently (a line format on the last line makes a real newline; a refused
  // edit is not there at all): then show what it holds now. Otherwise the texts agree and only a format Quill
  // does not show could differ: that is checked when typing pauses.
  if (differs) showDocument();
  else {
    if (idleTimer !== null) clearTimeout(idleTimer);
    idleTimer = setTimeout(showDocument, 400);
  }
  showStatus();
});

quill.on('selection-change', (range, _old, source) => {
  if (range === null || source === 'silent' || client === null) return;
  client.presence(range.index + range.length, { anchor: range.index, head: range.index + range.length });
});

async function start(): Promise<void> {
  try {
    // Same-origin worker first; the client learns the others (GET /api/collab/workers) to fail over.
    client = await CollabClient.connect({ url: location.origin, docId, userId, token });
  } catch (e) {
    errorEl.textContent = `could not open the document: ${(e as Error).message}`;
    statusEl.textContent = 'closed';
    statusEl.dataset['state'] = 'closed';
    return;
  }
  client.on('change', ({ remote, edits }) => {
    // Shown at once: a local change is applied at the editor's index, which must be the document's.
    if (remote) {
      if (edits !== undefined) showEdits(edits);
      else showDocument();
    }
    showStatus();
  });
  client.on('status', () => {
    showStatus();
    showDocument();
  });
  client.on('presence', onPresence);
  client.on('error', ({ code, message }) => {
    errorEl.textContent = `${code}: ${message}`;
  });
  client.on('closed', ({ code, reason }) => {
    errorEl.textContent = `closed (${code}${reason ? `: ${reason}` : ''})`;
    quill.disable();
  });
  showDocument();
  showStatus();
  // Acknowledgements raise no event: the badge looks again a few times a second.
  setInterval(showStatus, 250);
  document.body.dataset['loaded'] = 'true';
}

// The browser going offline (or a test emulating it) closes the socket at once: edits queue and the badge says
// offline, instead of waiting for a dead connection to time out.
window.addEventListener('offline', () => {
  client?.offline();
  showStatus();
});
window.addEventListener('online', () => {
  client?.online();
  showStatus();
});

// For tests and the curious: the document behind the editor.
(window as unknown as Record<string, unknown>)['collab'] = {
  get client() {
    return client;
  },
  quill,
  text: () => client?.text() ?? '',
  delta: () => (client === null ? null : docDelta(client)),
};

void start();
