// Loaded with `node --import` before a README program that check-snippets.mjs runs.
// A program that starts a server (`app.listen(3000)`) would run forever on a port
// that may be taken: the server listens on a free port instead, gets one request
// (GET /), and the process exits 0 when the answer is not a server error.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || typeof args[0] === 'string') args[0] = 0;
  else if (typeof args[0] === 'object' && args[0] !== null && 'port' in args[0]) args[0] = { ...args[0], port: 0 };
  this.once('listening', async () => {
    const { port } = this.address();
    const res = await fetch(`http://127.0.0.1:${port}/`);
    console.log(`GET / -> ${res.status}`);
    process.exit(res.status < 500 ? 0 : 1);
  });
  return listen.apply(this, args);
};
