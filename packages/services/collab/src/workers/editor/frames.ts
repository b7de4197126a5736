/**
 * How a worker writes WebSocket frames. A committed entry carries many keystrokes, each broadcast to every other
 * client of the document, and each `ws.send` is a write system call of its own: at 50 editors that was most of the
 * owner's CPU (the `writev` of every frame). Here a socket written to is corked until the end of this turn of the
 * event loop, so the frames a turn gives one socket leave in one write; and a message is encoded to UTF-8 once and
 * the same bytes go to every socket (ws would encode a string once per socket).
 */
import type { Socket } from 'node:net';
import type { RawData, WebSocket } from 'ws';

const corked = new Set<Socket>();
let flushing = false;

function flush(): void {
  flushing = false;
  for (const socket of corked) if (!socket.destroyed) socket.uncork();
  corked.clear();
}

/** Holds the socket's writes until the end of this turn (the poll phase's callbacks): one write for all of them. */
function corkForTurn(ws: WebSocket): void {
  // ws keeps the TCP socket as `_socket` (not in its types); a socket not there yet is simply not corked.
  const socket = (ws as unknown as { _socket?: Socket })._socket;
  if (socket === undefined || socket.destroyed || corked.has(socket)) return;
  socket.cork();
  corked.add(socket);
  if (!flushing) {
    flushing = true;
    setImmediate(flush);
  }
}

/** One message's bytes, encoded once for every socket it goes to. */
export function encode(message: unknown): Buffer {
  return Buffer.from(JSON.stringify(message));
}

/**
 * Sends `data` as a text frame, or drops the socket when more than `maxUnsent` bytes already wait for it (a client
 * that does not read is dropped rather than buffered for: it resyncs when it rejoins); false when dropped or closed.
 */
export function pushText(ws: WebSocket, data: Buffer | string, maxUnsent: number): boolean {
  if (ws.readyState !== 1) return false;
  if (ws.bufferedAmount > maxUnsent) {
    // Not a close frame: it would queue behind what the client is not reading.
    ws.terminate();
    return false;
  }
  corkForTurn(ws);
  ws.send(data, { binary: false });
  return true;
}

/** A received frame's bytes as one Buffer (ws hands a Buffer, or fragments as a list). */
export function asBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}
