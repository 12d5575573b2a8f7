// A bare TCP replier for the cluster-hop bench's transport floor, beside lib/nats-echo.mjs: answers
// every frame (u32 little-endian length, then that many bytes) on a connection with the frame's own
// bytes, writing the frames one read completed in one write. A request/reply with it is what a request
// plane costs with no broker in between (caller process → this process → caller), with nothing of
// ours on either end.
//
//   node bench/lib/tcp-echo.mjs      (prints its port once listening)
import net from 'node:net';

const server = net.createServer((socket) => {
  socket.setNoDelay(true);
  let pending = Buffer.alloc(0);
  socket.on('data', (data) => {
    let buf = pending.length === 0 ? data : Buffer.concat([pending, data]);
    let end = 0;
    while (buf.length - end >= 4) {
      const next = end + 4 + buf.readUInt32LE(end);
      if (next > buf.length) break;
      end = next;
    }
    if (end > 0) socket.write(buf.subarray(0, end));
    pending = buf.subarray(end);
  });
  socket.on('error', () => {});
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => process.exit(0));
