/**
 * The editor page: Quill 2 (snow theme: bold, italic, headings, lists) bound to the CRDT document of a Session,
 * quill-cursors for the other editors' cursors and selections in their colours, and a status line that says
 * whether the page is live, syncing (changes not yet acknowledged, or the document changing owner) or offline.
 *
 * URL: /docs/{doc_id}?user=<user_id>&token=<user_token>
 */
import Quill from 'quill';
import QuillCursors from 'quill-cursors';
import 'quill/dist/quill.snow.css';
import type { Op } from '@raftkit/crdt';
import { applyLocalChange, docDelta, reconcile, type Delta } from './binding.js';
import { Session, type PresenceMessage, type State } from './session.js';

Quill.register('modules/cursors', QuillCursors);

const params = new URLSearchParams(location.search);
const docId = decodeURIComponent(location.pathname.split('/').filter(Boolean).pop() ?? '');
const userId = params.get('user') ?? '';
const token = params.get('token') ?? '';

const statusEl = document.getElementById('status')!;
const errorEl = document.getElementById('error')!;
document.getElementById('doc-id')!.textContent = docId;
document.getElementById('user-id')!.textContent = userId;

const quill = new Quill('#editor', {
  theme: 'snow',
  modules: {
    toolbar: [[{ header: 1 }, { header: 2 }], ['bold', 'italic'], [{ list: 'ordered' }, { list: 'bullet' }], ['clean']],
    cursors: { transformOnTextChange: true, hideDelayMs: 60000 },
    // Undo takes back only this user's changes (remote ones shift the stack instead of entering it).
    history: { userOnly: true },
  },
  formats: ['bold', 'italic', 'header', 'list'],
  placeholder: 'Type here…',
});
const cursors = quill.getModule('cursors') as QuillCursors;
quill.disable();

function setState(state: State, detail: string): void {
  statusEl.textContent = detail ? `${state} · ${detail}` : state;
  statusEl.dataset['state'] = state;
  document.body.dataset['state'] = state;
}

/** Shows the document's content in the editor, moving only what changed (the local selection is kept). */
function showDocument(): void {
  const fix = reconcile(quill.getContents() as unknown as Delta, session.doc);
  if (fix !== null) quill.updateContents(fix.change as never, 'api');
}

let loaded = false;
const session = new Session({
  workers: [location.origin],
  docId,
  userId,
  token,
  onRemote: (_ops: readonly Op[]) => {
    showDocument();
  },
  onState: setState,
  onSnapshot: (ro) => {
    document.body.dataset['readOnly'] = String(ro);
    showDocument();
    quill.enable(!ro);
    if (!loaded) {
      loaded = true;
      document.body.dataset['loaded'] = 'true';
    }
  },
  onPresence: (p: PresenceMessage) => {
    if (p.user_id === userId && p.cursor !== null) return;
    if (p.cursor === null) {
      cursors.removeCursor(p.user_id);
      return;
    }
    cursors.createCursor(p.user_id, p.user_id, p.color ?? '#888');
    const sel = p.selection;
    const index = sel ? Math.min(sel.anchor, sel.head) : p.cursor;
    const length = sel ? Math.abs(sel.head - sel.anchor) : 0;
    cursors.moveCursor(p.user_id, { index, length });
  },
  onError: (code, message) => {
    errorEl.textContent = `${code}: ${message}`;
  },
  onReadOnly: () => {
    document.body.dataset['readOnly'] = 'true';
    quill.disable();
  },
});

quill.on('text-change', (change, _old, source) => {
  if (source !== 'user') return;
  const ops = applyLocalChange(session.doc, change as unknown as Delta);
  session.submit(ops);
  // The document may hold the change differently (a line format on the last line makes a real newline).
  showDocument();
});

quill.on('selection-change', (range, _old, source) => {
  if (range === null || source === 'silent') return;
  session.presence(range.index + range.length, { anchor: range.index, head: range.index + range.length });
});

// The browser going offline (or the test emulating it) closes the socket at once: edits queue and the status says
// offline, instead of waiting for a dead connection to time out.
window.addEventListener('offline', () => session.offline());
window.addEventListener('online', () => session.online());

// For tests and the curious: the document behind the editor.
(window as unknown as Record<string, unknown>)['collab'] = {
  session,
  quill,
  text: () => session.doc.text(),
  delta: () => docDelta(session.doc),
};
