import type { Server } from 'node:http';
import type { Limiter } from '@floodgate/core';
import { normalizeIp } from '@floodgate/core/adapter';
import { type RawData, type WebSocket, WebSocketServer } from 'ws';

/** Connections limited at the upgrade (429 before any WebSocket exists), messages one by one. */
export function limitWebSockets(server: Server, limits: { connections: Limiter; messages: Limiter }, onMessage: (ws: WebSocket, data: RawData) => void) {
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', async (req, socket, head) => {
    try {
      const key = normalizeIp(req.socket.remoteAddress) ?? 'unknown'; // the TCP peer, IPv6 grouped by /56
      const decision = await limits.connections.consume(key);
      if (!decision.allowed) {
        const retryAfter = Number.isFinite(decision.retryAfterMs) ? `Retry-After: ${Math.max(1, Math.ceil(decision.retryAfterMs / 1000))}\r\n` : '';
        socket.end(`HTTP/1.1 429 Too Many Requests\r\n${retryAfter}Connection: close\r\nContent-Length: 0\r\n\r\n`);
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on('message', async (data) => {
          const message = await limits.messages.consume(key);
          if (message.allowed) onMessage(ws, data);
          else ws.send(JSON.stringify({ error: { code: 'RATE_LIMITED', retryAfterMs: message.retryAfterMs, rule: message.rule } }));
        });
        wss.emit('connection', ws, req);
      });
    } catch {
      socket.destroy(); // the store failed with onStoreError throwing, or a bad key: refuse, never crash
    }
  });
  return wss;
}
