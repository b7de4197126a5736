/**
 * A push as written to the watchers' sockets: its JSON text and the whole WebSocket frame carrying it, built once
 * per push and gateway and written as is to every socket. `ws.send` frames and writes per socket: an options
 * object, a header buffer, the text encoded again (a string) and a cork, two writes and an uncork (a writev);
 * a server's frames are never masked, so every watcher's frame of one push is the same bytes.
 */
import type { Duplex } from 'node:stream';
import { WebSocket } from 'ws';

export interface Frame {
  /** The message's JSON text (what a watcher parses). */
  text: string;
  /** The unmasked final text frame (RFC 6455 5.2) carrying `text`. */
  bytes: Buffer;
}

export function textFrame(text: string): Frame {
  const payload = Buffer.from(text, 'utf8');
  const n = payload.length;
  const head = n < 126 ? 2 : n < 65_536 ? 4 : 10;
  const bytes = Buffer.allocUnsafe(head + n);
  bytes[0] = 0x81; // FIN, opcode 1 (text)
  if (n < 126) bytes[1] = n;
  else if (n < 65_536) {
    bytes[1] = 126;
    bytes.writeUInt16BE(n, 2);
  } else {
    bytes[1] = 127;
    bytes.writeUInt32BE(Math.floor(n / 2 ** 32), 2);
    bytes.writeUInt32BE(n >>> 0, 6);
  }
  payload.copy(bytes, head);
  return { text, bytes };
}

/**
 * Writes a push's frame to one watcher, or drops the watcher when it leaves more than `maxUnsent` bytes unread (a
 * close frame would queue behind what it does not read): false when dropped or no longer open. The frame goes to
 * the socket under the WebSocket directly; ws writes its own frames (snapshots, errors, close) to the same socket
 * synchronously (no permessage-deflate on the gateway's server, no Blob sent), so the order of messages holds.
 */
export function writeFrame(ws: WebSocket, frame: Frame, maxUnsent: number): boolean {
  if (ws.readyState !== WebSocket.OPEN) return false;
  if (ws.bufferedAmount > maxUnsent) {
    ws.terminate();
    return false;
  }
  const socket = (ws as unknown as { _socket?: Duplex | null })._socket;
  if (socket === undefined || socket === null) ws.send(frame.text);
  else socket.write(frame.bytes);
  return true;
}
