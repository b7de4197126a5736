/**
 * Pushing to a WebSocket that may not read. `ws.send` queues in the process whatever the kernel will not take, so a
 * watcher that never reads (one per connection the listener admits, no token needed on an open route) would grow
 * the server by every message sent to it. Past `maxUnsent` bytes queued the socket is dropped instead: the services
 * push whole states or resync on join, so a dropped client that reconnects misses nothing.
 */

/** What this needs of a socket (the `ws` package's WebSocket has it). */
export interface PushSocket {
  readonly bufferedAmount: number;
  send(text: string): void;
  terminate(): void;
}

/** Sends `text`, or drops the socket when more than `maxUnsent` bytes already wait for it; false when dropped. */
export function pushOrDrop(socket: PushSocket, text: string, maxUnsent: number): boolean {
  if (socket.bufferedAmount > maxUnsent) {
    // Not a close frame: it would queue behind what the client is not reading.
    socket.terminate();
    return false;
  }
  socket.send(text);
  return true;
}
